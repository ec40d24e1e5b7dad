//go:build unix

package testfifo

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestRefused(t *testing.T) {
	dir := t.TempDir()
	Refused(t, filepath.Join(dir, "refused"), func() error {
		return errors.New("x is not a regular file (p)")
	})

	// A reader that accepts the FIFO fails the check.
	var r recorder
	r.TB = t
	path := filepath.Join(dir, "accepted")
	Refused(&r, path, func() error {
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			f.Close()
		}
		return err
	})
	if !r.failed {
		t.Fatal("a reader that opened the FIFO passed")
	}
}
