//go:build !unix

package main

// processCPU is not measured here: rows carry no CPU per MB.
func processCPU() (float64, bool) { return 0, false }
