package diskio

import (
	"errors"
	"os"
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

func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.tmp")
	a, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := TryLock(a); !ok || err != nil {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	b, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ok, err := TryLock(b); ok || err != nil {
		t.Fatalf("second descriptor while held: %v %v, want false", ok, err)
	}
	a.Close()
	if ok, err := TryLock(b); !ok || err != nil {
		t.Fatalf("after the holder closed: %v %v", ok, err)
	}
}
