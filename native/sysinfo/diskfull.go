//go:build unix

package sysinfo

import (
	"errors"
	"syscall"
)

// IsDiskFull reports whether err is the operating system saying that the
// volume, or the user's quota on it, is full (ENOSPC, EDQUOT): the one test
// the downloader and the prompt cache share.
func IsDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
