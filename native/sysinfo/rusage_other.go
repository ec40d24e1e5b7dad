//go:build !unix

package sysinfo

import "time"

// ProcessCPUTime is 0 where the process CPU clock is not read: callers then
// report wall-time figures only.
func ProcessCPUTime() time.Duration { return 0 }

// PeakRSS is 0 where the system does not report the peak resident set.
func PeakRSS() uint64 { return 0 }
