//go:build unix

package sysinfo

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// ProcessCPUTime is the user+system CPU time of the process so far, or 0
// if the clock cannot be read.
func ProcessCPUTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// PeakRSS is the largest resident set size the process has had, in bytes,
// as the kernel counts it (getrusage's ru_maxrss), or 0 if it cannot be
// read.
func PeakRSS() uint64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil || ru.Maxrss < 0 {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return uint64(ru.Maxrss) // bytes there, kilobytes elsewhere
	}
	return uint64(ru.Maxrss) * 1024
}
