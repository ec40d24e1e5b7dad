package atomicfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/atomicfile"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "settings.json")
	for _, want := range []string{"first", "second, longer"} {
		if err := atomicfile.WriteFile(path, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("read %q, want %q", got, want)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	assertOnlyFile(t, filepath.Dir(path), "settings.json")
}

func TestAbortKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := atomicfile.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("half"); err != nil {
		t.Fatal(err)
	}
	f.Abort()
	f.Abort()
	got, _ := os.ReadFile(path)
	if string(got) != "old" {
		t.Fatalf("read %q after abort, want old", got)
	}
	assertOnlyFile(t, dir, "f")
	if err := f.Commit(); err == nil {
		t.Fatal("commit after abort succeeded")
	}
}

func TestWriteFromReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r")
	if err := atomicfile.WriteFrom(path, strings.NewReader("streamed"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "streamed" {
		t.Fatalf("read %q", got)
	}
}

func TestCommitIntoMissingDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d", "f")
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("commit into a removed directory: %v, want an error naming %s", err, path)
	}
}

func assertOnlyFile(t *testing.T, dir, name string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != name {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only %s", names, name)
	}
}

func ExampleWriteFile() {
	dir, _ := os.MkdirTemp("", "atomicfile")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "settings.json")
	if err := atomicfile.WriteFile(path, []byte(`{"port":8484}`), 0o600); err != nil {
		panic(err)
	}
	b, _ := os.ReadFile(path)
	os.Stdout.Write(b)
	// Output: {"port":8484}
}
