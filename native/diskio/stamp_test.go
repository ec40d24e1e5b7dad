package diskio

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A stamp changes when a file is rewritten in place (its time), replaced
// by another (its inode) or resized, and not when it is only read.
func TestStamp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("abcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	stamp := func() Stamp {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return StampOf(fi)
	}
	a := stamp()
	if a.Size != 4 || a.ModNanos == 0 {
		t.Fatalf("stamp %+v", a)
	}
	if _, err := os.ReadFile(path); err != nil || stamp() != a {
		t.Fatalf("a read changed the stamp: %+v, %+v", stamp(), a)
	}
	// Same size, an older time set back by hand: still a new version.
	if err := os.WriteFile(path, []byte("abce"), 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Unix(0, a.ModNanos).Add(-time.Hour)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	if stamp() == a {
		t.Fatal("a rewrite kept the stamp")
	}
	// Another file renamed over it, with the first one's time.
	other := path + ".new"
	if err := os.WriteFile(other, []byte("abcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := stamp()
	mt := time.Unix(0, b.ModNanos)
	if err := os.Chtimes(other, mt, mt); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if c := stamp(); c == b && c.Inode != 0 {
		t.Fatalf("a replaced file kept the stamp %+v", c)
	}
}

// An open file's stamp is the one it was opened with; written in place,
// it reports a change, which a file renamed over its path does not make.
func TestDirectFileChanged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shard")
	if err := os.WriteFile(path, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	f, err := OpenDirect(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Stamp() != StampOf(fi) {
		t.Errorf("stamp %+v, the file's %+v", f.Stamp(), StampOf(fi))
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("replacement"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if changed, err := f.Changed(); err != nil || changed {
		t.Errorf("after a rename over its path: changed %v, %v", changed, err)
	}
	g, err := OpenDirect(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("zeros"), 2); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := os.Chtimes(path, past, time.Now().Add(time.Minute)); err != nil { // a coarse clock still sees it
		t.Fatal(err)
	}
	if changed, err := g.Changed(); err != nil || !changed {
		t.Errorf("after a write in place: changed %v, %v", changed, err)
	}
}
