package fingerprint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var quiet = slog.New(slog.DiscardHandler)

// settle sets a file's times an hour back, as a model written long ago.
func settle(t *testing.T, path string) {
	t.Helper()
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A file's digest is the SHA-256 of its bytes; it is read once and then
// remembered under its stamp, read again once the file is rewritten, and
// a copy of the same bytes elsewhere has the same digest.
func TestFilesRemembered(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(t.TempDir(), "sub", "fingerprints.json")
	o := Options{Store: store, Logger: quiet}
	a := filepath.Join(dir, "a.safetensors")
	b := filepath.Join(dir, "b.safetensors")
	big := bytes.Repeat([]byte("0123456789abcdef"), (readChunk+12345)/16) // past one read
	write(t, a, big)
	write(t, b, []byte("small"))
	settle(t, a)
	settle(t, b)
	ctx := context.Background()
	check := func(what string, want ...Source) []File {
		t.Helper()
		files, err := Files(ctx, []string{a, b}, o)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range files {
			data, _ := os.ReadFile(f.Path)
			if f.SHA256 != sha256.Sum256(data) || f.From != want[i] {
				t.Errorf("%s: %s: %s from %s, want sha256 %x from %s", what, f.Path, f.SHA256, f.From, sha256.Sum256(data), want[i])
			}
		}
		return files
	}
	check("first", FromRead, FromRead)
	check("again", FromStore, FromStore)

	// b rewritten in place, same size: read again.
	write(t, b, []byte("SMALL"))
	settle(t, b)
	check("b rewritten", FromStore, FromRead)
	check("b remembered", FromStore, FromStore)

	// Just written: read, and not remembered (its time may not change on
	// the next write).
	write(t, b, []byte("fresh"))
	check("b fresh", FromStore, FromRead)
	check("b fresh again", FromStore, FromRead)
}

// A damaged store is logged and rebuilt, never fatal; a file gone is
// dropped from it.
func TestDamagedStore(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "fingerprints.json")
	a := filepath.Join(dir, "a")
	write(t, a, []byte("weights"))
	settle(t, a)
	write(t, store, []byte(`{"version":2,"files":{"x":`))
	var log bytes.Buffer
	o := Options{Store: store, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	files, err := Files(context.Background(), []string{a}, o)
	if err != nil || files[0].From != FromRead {
		t.Fatalf("%+v, %v", files, err)
	}
	if !strings.Contains(log.String(), "cannot be read") {
		t.Errorf("the damaged store was not logged: %s", log.String())
	}
	if files, _ := Files(context.Background(), []string{a}, o); files[0].From != FromStore {
		t.Fatalf("the store was not rebuilt: %+v", files)
	}
	gone := filepath.Join(dir, "gone")
	write(t, gone, []byte("x"))
	settle(t, gone)
	Files(context.Background(), []string{gone}, o)
	os.Remove(gone)
	os.Remove(a)
	write(t, a, []byte("other weights"))
	settle(t, a)
	Files(context.Background(), []string{a}, o)
	s, err := readStore(store)
	if err != nil || len(s.Files) != 1 {
		t.Fatalf("store %+v, %v", s, err)
	}
}

// A shard that links into a Hugging Face cache's blobs is named by the
// SHA-256 the download verified: it is not read.
func TestHubBlob(t *testing.T) {
	repo := t.TempDir()
	sum := sha256.Sum256([]byte("blob"))
	name := hex.EncodeToString(sum[:])
	if err := os.MkdirAll(filepath.Join(repo, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "snapshots", "abc"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(repo, "blobs", name), []byte("blob"))
	link := filepath.Join(repo, "snapshots", "abc", "model.safetensors")
	if err := os.Symlink(filepath.Join("..", "..", "blobs", name), link); err != nil {
		t.Fatal(err)
	}
	// A link to a file not named by a digest is read.
	write(t, filepath.Join(repo, "blobs", "notadigest"), []byte("x"))
	other := filepath.Join(repo, "snapshots", "abc", "other.safetensors")
	if err := os.Symlink(filepath.Join("..", "..", "blobs", "notadigest"), other); err != nil {
		t.Fatal(err)
	}
	files, err := Files(context.Background(), []string{link, other}, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if files[0].From != FromHub || files[0].SHA256 != sum || files[1].From != FromRead || files[1].SHA256 != sha256.Sum256([]byte("x")) {
		t.Fatalf("%+v", files)
	}
}

// Model digests differ with any shard's bytes or name, and are equal for
// copies of the same files.
func TestModel(t *testing.T) {
	ctx := context.Background()
	digest := func(files map[string]string, names ...string) Hash {
		t.Helper()
		dir := t.TempDir()
		for n, c := range files {
			write(t, filepath.Join(dir, n), []byte(c))
		}
		h, err := Model(ctx, dir, names, Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := digest(map[string]string{"a": "1", "b": "2"}, "a", "b")
	if digest(map[string]string{"a": "1", "b": "2"}, "a", "b") != base {
		t.Error("a copy has another digest")
	}
	if digest(map[string]string{"a": "1", "b": "3"}, "a", "b") == base {
		t.Error("other bytes, same digest")
	}
	if digest(map[string]string{"a": "1", "c": "2"}, "a", "c") == base {
		t.Error("another name, same digest")
	}
	if _, err := Model(ctx, t.TempDir(), []string{"missing"}, Options{Logger: quiet}); err == nil {
		t.Error("a missing shard was fingerprinted")
	}
}

// FuzzStore: any bytes in the store file give a store or an error, never
// a panic, and what parses looks up only well-formed digests.
func FuzzStore(f *testing.F) {
	f.Add([]byte(`{"version":2,"files":{"/a":{"dev":1,"inode":2,"size":3,"mtime_ns":4,"sha256":"00"}}}`))
	f.Add([]byte(`{"version":2,"files":{"/a":{"dev":1,"inode":2,"size":3,"mtime_ns":4,"sha256":"00","regions":"ab","region_count":1,"crc32c":"01020304"}}}`))
	f.Add([]byte(`{"version":2,"files":null}`))
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "fingerprints.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := readStore(path)
		if err != nil {
			return
		}
		one, _ := newRegionSet([]Region{{0, 1}})
		for p, e := range s.Files {
			if h, _, ok := s.lookup(p, e.Stamp, nil); ok && !strings.EqualFold(h.String(), e.SHA256) {
				t.Fatalf("%q looked up as %s", e.SHA256, h)
			}
			if _, sums, ok := s.lookup(p, e.Stamp, one); ok && len(sums) != 1 {
				t.Fatalf("checksums %v of one region", sums)
			}
		}
	})
}
