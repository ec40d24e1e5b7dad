//go:build unix

package diskio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrLocked reports that another process holds a lock file.
var ErrLocked = errors.New("locked by another process")

// LockFile takes an exclusive, non-blocking flock(2) on the file at path,
// creating it and its directory if needed. It is the same kind of lock that
// huggingface_hub takes on <cache>/.locks/<repo>/<blob>.lock, so the two never
// write one blob at once. The lock dies with the process (even on SIGKILL);
// unlock releases it earlier. If another process holds it, the error wraps
// ErrLocked.
func LockFile(path string) (unlock func() error, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("diskio: lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("diskio: lock %s: %w", path, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("diskio: lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("diskio: lock %s: %w", path, err)
	}
	return func() error {
		// Closing the descriptor releases the flock.
		if err := f.Close(); err != nil {
			return fmt.Errorf("diskio: unlock %s: %w", path, err)
		}
		return nil
	}, nil
}

// TryLock takes an exclusive, non-blocking flock(2) on the open file f; it
// reports false when another descriptor holds one. The lock lasts until f
// is closed (or the process dies, even by SIGKILL): a writer that holds it
// on its temporary file tells a sweeper that the file is still being
// written (internal/atomicfile).
func TryLock(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch err {
		case nil:
			return true, nil
		case unix.EINTR:
			continue
		case unix.EWOULDBLOCK:
			return false, nil
		}
		return false, fmt.Errorf("diskio: lock %s: %w", f.Name(), err)
	}
}
