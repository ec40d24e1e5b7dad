package diskio

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".locks", "models--a--b", "blob.lock")
	unlock, err := LockFile(path)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	if _, err := LockFile(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock while held: err = %v, want ErrLocked", err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	unlock2, err := LockFile(path)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	if err := unlock2(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
}
