package packed_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/packed"
	"github.com/spoolhq/spool/internal/fixtures"
)

// digests is the SHA-256 of every safetensors file of dir.
func digests(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	names, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		out[filepath.Base(p)] = hex.EncodeToString(s[:])
	}
	return out
}

// TestConvertReleaseUnpack: converting a model in place packs every shard
// with experts, releases their raw bytes (the directory takes less disk,
// the shards keep their size and headers, the packs stay current), and
// records each shard's stage; unpacking restores every shard byte for byte
// (SHA-256 equal), removes the packs and the record.
func TestConvertReleaseUnpack(t *testing.T) {
	ctx := context.Background()
	dir := fixtures.CopyModel(t, fixtures.Path(t, "glm52-mini"))
	want := digests(t, dir)
	sum, err := packed.Convert(ctx, dir, packed.Options{Release: true, Force: true}, fingerprint.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := packed.ReadRecord(dir)
	if err != nil || rec == nil {
		t.Fatalf("record %v, %v", rec, err)
	}
	released := 0
	for _, r := range sum.Shards {
		f, _ := rec.File(r.Shard)
		if f.Stage != r.Stage || f.SHA256 != want[r.Shard] {
			t.Errorf("%s: stage %s (result %s), sha %s, want %s", r.Shard, f.Stage, r.Stage, f.SHA256, want[r.Shard])
		}
		if r.Stage == packed.Released {
			released++
			x, err := expertpack.ReadIndex(r.Pack)
			if err != nil {
				t.Fatal(err)
			}
			if err := x.Check(dir); err != nil {
				t.Errorf("%s's pack is not current after the release: %v", r.Shard, err)
			}
		}
	}
	if released == 0 {
		t.Fatal("nothing released")
	}
	if sum.DiskAfter >= sum.DiskBefore {
		t.Fatalf("disk %d bytes before, %d after", sum.DiskBefore, sum.DiskAfter)
	}
	if got := digests(t, dir); got["out-00001.safetensors"] == want["out-00001.safetensors"] {
		t.Fatal("a released shard still has its original bytes")
	}
	if err := rec.Ready(dir); err != nil {
		t.Fatal(err)
	}
	// Converting again changes nothing.
	again, err := packed.Convert(ctx, dir, packed.Options{Release: true, Force: true}, fingerprint.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again.Shards {
		if r.Wrote || r.ReleasedBytes != 0 {
			t.Errorf("%s converted again: %+v", r.Shard, r)
		}
	}

	if _, err := packed.Unpack(ctx, dir, packed.UnpackOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := digests(t, dir); len(got) != len(want) {
		t.Fatalf("%d shards after unpacking, want %d", len(got), len(want))
	} else {
		for name, d := range want {
			if got[name] != d {
				t.Errorf("%s: SHA-256 %s after unpacking, want %s", name, got[name], d)
			}
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"+expertpack.Suffix+"*"))
	if len(left) != 0 {
		t.Errorf("packs left: %v", left)
	}
	if _, err := os.Stat(filepath.Join(dir, packed.RecordName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record of a plain directory stays: %v", err)
	}
}

// TestConvertRefusesLinks: releasing in place refuses a shard that is a
// link (a Hugging Face cache's blob, which other tools read).
func TestConvertRefusesLinks(t *testing.T) {
	src := fixtures.CopyModel(t, fixtures.Path(t, "glm52-tiny"))
	dir := t.TempDir()
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	_, err := packed.Convert(context.Background(), dir, packed.Options{Release: true, Force: true}, fingerprint.Options{}, nil)
	if err == nil || !strings.Contains(err.Error(), "link") {
		t.Fatalf("got %v, want a refusal naming the link", err)
	}
}

// TestConvertWaitsForEngines: a model open in an engine (packed.Use, which
// the loader takes) is not converted under it, and an engine does not open
// one being converted.
func TestConvertWaitsForEngines(t *testing.T) {
	dir := fixtures.CopyModel(t, fixtures.Path(t, "glm52-tiny"))
	unlock, err := packed.Use(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := packed.Convert(context.Background(), dir, packed.Options{Release: true, Force: true}, fingerprint.Options{}, nil); !errors.Is(err, packed.ErrInUse) {
		t.Fatalf("converting a model in use: %v", err)
	}
	unlock()
	ul, err := packed.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ul()
	if _, err := packed.Use(dir); !errors.Is(err, packed.ErrInUse) {
		t.Fatalf("opening a model being converted: %v", err)
	}
}
