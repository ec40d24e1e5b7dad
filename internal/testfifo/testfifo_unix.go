//go:build unix

package testfifo

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// wait bounds how long open may take before it counts as blocked.
const wait = 5 * time.Second

// Refused makes a FIFO at path and calls open, which must fail within a few
// seconds with an error saying "not a regular file". If open blocks, the
// FIFO is opened for writing to release it and the test fails.
func Refused(t testing.TB, path string, open func() error) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- open() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a FIFO at %s: %v, want a not-a-regular-file error", path, err)
		}
	case <-time.After(wait):
		// Release the blocked open so the test binary can exit.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatalf("blocked on a FIFO at %s", path)
	}
}
