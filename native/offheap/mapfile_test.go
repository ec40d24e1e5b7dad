package offheap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestMapFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte("spool"), 10000)
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := MapFile(f)
	f.Close() // the mapping outlives the descriptor
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Error("mapped bytes differ from the file")
	}
	if err := Unmap(b); err != nil {
		t.Error(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o644)
	f, _ = os.Open(empty)
	defer f.Close()
	if b, err := MapFile(f); err != nil || len(b) != 0 {
		t.Errorf("empty file: %v, %d bytes", err, len(b))
	}
}
