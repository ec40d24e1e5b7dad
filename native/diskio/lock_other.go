//go:build !unix

package diskio

import (
	"errors"
	"fmt"
	"os"
)

// ErrLocked reports that another process holds a lock file.
var ErrLocked = errors.New("locked by another process")

// LockFile is unsupported on this system (no such OS service here); it returns an error wrapping
// errors.ErrUnsupported.
func LockFile(path string) (unlock func() error, err error) {
	return nil, fmt.Errorf("diskio: lock %s: %w", path, errors.ErrUnsupported)
}

// TryLock is unsupported on this system: it returns an error wrapping
// errors.ErrUnsupported.
func TryLock(f *os.File) (bool, error) {
	return false, fmt.Errorf("diskio: lock %s: %w", f.Name(), errors.ErrUnsupported)
}
