package fingerprint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/crc32c"
	"github.com/spoolhq/spool/native/diskio"
)

// Regions' checksums are taken in the read that takes the digest, in the
// order asked, across read chunks; they are remembered with it, and asked
// for other regions the file is read again.
func TestRegions(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(t.TempDir(), "fingerprints.json")
	a := filepath.Join(dir, "a.safetensors")
	data := make([]byte, readChunk+3*4096+123)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	write(t, a, data)
	settle(t, a)
	regions := []Region{{readChunk - 100, 300}, {5, 10}, {0, 0}, {readChunk + 1000, int64(len(data)) - readChunk - 1000}, {16, 4096}}
	want := make([]uint32, len(regions))
	for i, r := range regions {
		want[i] = crc32c.Checksum(data[r.Off : r.Off+r.Len])
	}
	ctx := context.Background()
	get := func(rs []Region) File {
		t.Helper()
		files, err := Files(ctx, []string{a}, Options{Store: store, Logger: quiet, Regions: [][]Region{rs}})
		if err != nil {
			t.Fatal(err)
		}
		return files[0]
	}
	for _, from := range []Source{FromRead, FromStore} {
		f := get(regions)
		if f.From != from || f.SHA256 != sha256.Sum256(data) {
			t.Fatalf("%s from %s, want from %s", f.SHA256, f.From, from)
		}
		if len(f.CRC32C) != len(want) {
			t.Fatalf("%d checksums, want %d", len(f.CRC32C), len(want))
		}
		for i := range want {
			if f.CRC32C[i] != want[i] {
				t.Errorf("%s: region %d: %08x, want %08x", from, i, f.CRC32C[i], want[i])
			}
		}
	}
	if f := get(regions[:2]); f.From != FromRead || f.CRC32C[1] != want[1] {
		t.Errorf("other regions: %+v", f)
	}
	if f := get(nil); f.From != FromStore || f.CRC32C != nil {
		t.Errorf("no regions: %+v", f)
	}
	for _, bad := range [][]Region{{{0, 10}, {5, 10}}, {{int64(len(data)) - 1, 2}}, {{-1, 1}}} {
		if _, err := Files(ctx, []string{a}, Options{Logger: quiet, Regions: [][]Region{bad}}); err == nil {
			t.Errorf("regions %v: no error", bad)
		}
	}
}

// A store of the first format, which holds no checksums, is not misread:
// the files are read again, once, and the store is upgraded.
func TestStoreUpgrade(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "fingerprints.json")
	a := filepath.Join(dir, "a")
	write(t, a, []byte("weights of an older store"))
	settle(t, a)
	fi, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	// The entry's stamp is the file's: only the format tells it apart.
	old, err := json.Marshal(map[string]any{"version": 1, "files": map[string]entry{a: {Stamp: diskio.StampOf(fi), SHA256: strings.Repeat("00", 32)}}})
	if err != nil {
		t.Fatal(err)
	}
	write(t, store, old)
	var log bytes.Buffer
	o := Options{Store: store, Logger: slog.New(slog.NewTextHandler(&log, nil)), Regions: [][]Region{{{0, 7}}}}
	for _, from := range []Source{FromRead, FromStore} {
		files, err := Files(context.Background(), []string{a}, o)
		if err != nil {
			t.Fatal(err)
		}
		if f := files[0]; f.From != from || f.SHA256 != sha256.Sum256([]byte("weights of an older store")) || f.CRC32C[0] != crc32c.Checksum([]byte("weights")) {
			t.Fatalf("%+v, want from %s", f, from)
		}
	}
	if !strings.Contains(log.String(), "older format") || strings.Contains(log.String(), "cannot be read") {
		t.Errorf("the upgrade was not logged as one: %s", log.String())
	}
	if s, err := readStore(store); err != nil || s.Version != storeVersion {
		t.Errorf("the store was not upgraded: %+v, %v", s, err)
	}
}

// A shard in a Hugging Face cache is named by its blob, and read once for
// its regions' checksums, which are remembered.
func TestHubBlobRegions(t *testing.T) {
	repo := t.TempDir()
	blob := []byte("blob bytes of an expert")
	sum := sha256.Sum256(blob)
	name := hex.EncodeToString(sum[:])
	for _, d := range []string{"blobs", filepath.Join("snapshots", "abc")} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(repo, "blobs", name), blob)
	settle(t, filepath.Join(repo, "blobs", name))
	link := filepath.Join(repo, "snapshots", "abc", "model.safetensors")
	if err := os.Symlink(filepath.Join("..", "..", "blobs", name), link); err != nil {
		t.Fatal(err)
	}
	o := Options{Store: filepath.Join(t.TempDir(), "fp.json"), Logger: quiet, Regions: [][]Region{{{5, 5}}}}
	var log bytes.Buffer
	for i := range 2 {
		if i == 1 {
			o.Logger = slog.New(slog.NewTextHandler(&log, nil))
		}
		files, err := Files(context.Background(), []string{link}, o)
		if err != nil {
			t.Fatal(err)
		}
		if f := files[0]; f.From != FromHub || f.SHA256 != sum || f.CRC32C[0] != crc32c.Checksum([]byte("bytes")) {
			t.Fatalf("%+v", f)
		}
	}
	if strings.Contains(log.String(), "reading the weights") {
		t.Errorf("the blob's checksums were not remembered: %s", log.String())
	}
}
