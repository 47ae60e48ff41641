//go:build race

package main

// raceBuild: the test binary has the race detector.
const raceBuild = true
