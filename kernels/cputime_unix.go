//go:build unix

package kernels

import (
	"syscall"
	"time"
)

// processCPUTime is the user+system CPU time of the process so far, or 0
// if the clock cannot be read.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
