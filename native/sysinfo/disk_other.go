//go:build !linux && !darwin

package sysinfo

import (
	"errors"
	"fmt"
)

// DiskFree is unsupported on this system (no such OS service here); it returns an error wrapping
// errors.ErrUnsupported.
func DiskFree(path string) (DiskSpace, error) {
	return DiskSpace{}, fmt.Errorf("sysinfo: disk space of %q: %w", path, errors.ErrUnsupported)
}
