//go:build unix

package main

import (
	"runtime"
	"syscall"
)

// peakRSS is the process's peak resident set size in bytes (getrusage's
// ru_maxrss: KiB on Linux, bytes on macOS).
func peakRSS() (int64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss), nil
	}
	return int64(ru.Maxrss) * 1024, nil
}
