//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPU is this process's user and system CPU seconds so far.
func processCPU() (float64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return d.Seconds(), true
}
