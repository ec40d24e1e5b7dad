//go:build !unix

package sysinfo

import (
	"errors"
	"syscall"
)

// IsDiskFull reports whether err is the operating system saying that the
// volume is full (ENOSPC).
func IsDiskFull(err error) bool { return errors.Is(err, syscall.ENOSPC) }
