//go:build !unix

package kernels

import "time"

// processCPUTime is 0 where the process CPU clock is not read: the
// benchmark then reports wall-time figures only.
func processCPUTime() time.Duration { return 0 }
