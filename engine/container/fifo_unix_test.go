//go:build unix

package container

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFIFOShardIsRefusedWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "model-00001-of-00001.safetensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Open(dir)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a FIFO shard: %v, want a not-a-regular-file error", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the open so the test binary can exit.
		if f, err := os.OpenFile(filepath.Join(dir, "model-00001-of-00001.safetensors"), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("Open blocked on a FIFO shard")
	}
}
