//go:build !linux && !darwin

package native

import (
	"errors"
	"fmt"
)

// DiskFree is not implemented on this system; it returns an error wrapping
// errors.ErrUnsupported.
func DiskFree(path string) (DiskSpace, error) {
	return DiskSpace{}, fmt.Errorf("native: disk space of %q: %w", path, errors.ErrUnsupported)
}
