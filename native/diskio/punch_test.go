package diskio

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPunchHole: the block-aligned interior of a range reads as zeros and
// stops taking disk space, the bytes around it and the file's size stay,
// and punching again changes nothing.
func TestPunchHole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte{0xa5, 0x5a, 0x33}, 1<<20) // 3 MiB
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	before, err := AllocatedBytes(path)
	if err != nil {
		t.Fatal(err)
	}
	off, n := int64(100_000), int64(2_000_000)
	got, err := PunchHole(f, off, n)
	if errors.Is(err, ErrPunchUnsupported) {
		t.Skipf("%s cannot punch holes: %v", filepath.Dir(path), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	bs, _ := blockSize(f)
	start, end := (off+bs-1)/bs*bs, (off+n)/bs*bs
	if got != end-start {
		t.Fatalf("released %d bytes, want the aligned interior %d", got, end-start)
	}
	if again, err := PunchHole(f, off, n); err != nil || again != got {
		t.Fatalf("punching again: %d, %v", again, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != len(want) {
		t.Fatalf("size %d, want %d", len(b), len(want))
	}
	for i := range b {
		inside := int64(i) >= start && int64(i) < end
		if inside && b[i] != 0 || !inside && b[i] != want[i] {
			t.Fatalf("byte %d is %#x (inside the hole: %v)", i, b[i], inside)
		}
	}
	after, err := AllocatedBytes(path)
	if err != nil {
		t.Fatal(err)
	}
	if before-after < got*9/10 {
		t.Fatalf("allocated %d bytes before, %d after: %d released, want about %d", before, after, before-after, got)
	}
	if n, err := PunchHole(f, 10, 100); err != nil || n != 0 {
		t.Fatalf("a range inside one block: %d, %v", n, err)
	}
}
