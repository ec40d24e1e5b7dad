//go:build unix

package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFIFOConfigIsRefusedWithoutBlocking(t *testing.T) {
	for _, name := range []string{"config.json", "generation_config.json"} {
		dir := t.TempDir()
		if name != "config.json" {
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		path := filepath.Join(dir, name)
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := Load(dir)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("a FIFO %s: %v, want a not-a-regular-file error", name, err)
			}
		case <-time.After(5 * time.Second):
			if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
				f.Close()
			}
			t.Fatalf("Load blocked on a FIFO %s", name)
		}
	}
}
