package expertpack_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/internal/testmodel"
)

// copyModel copies a fixture model into a temporary directory (packs are
// written beside the shards).
func copyModel(t *testing.T, model string) string {
	return fixtures.CopyModel(t, fixtures.Path(t, model))
}

// readRecord reads an entry's record from its pack.
func readRecord(t *testing.T, path string, e expertpack.Entry) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := make([]byte, e.Length)
	if _, err := f.ReadAt(rec, e.Offset); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestPackEveryExpert packs both fixture models and checks every routed
// expert: the packed ones decode to exactly the shard's bytes, whole and
// in place with bytes landing in random pieces; the others are left out.
func TestPackEveryExpert(t *testing.T) {
	for _, model := range []string{"glm52-tiny", "glm52-mini"} {
		t.Run(model, func(t *testing.T) {
			dir := copyModel(t, model)
			c, cfg := testmodel.Open(t, dir)
			// Force: the fixtures' experts are too small to gain; every one
			// is packed anyway so that every one goes through the codec.
			res, err := expertpack.PackModel(context.Background(), c, cfg, expertpack.Options{Force: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			packs := map[string]*expertpack.Index{}
			for _, r := range res {
				if r.Path == "" {
					continue
				}
				x, err := expertpack.ReadIndex(r.Path)
				if err != nil {
					t.Fatal(err)
				}
				if err := x.Check(dir); err != nil {
					t.Fatal(err)
				}
				packs[r.Path] = x
				t.Logf("%s: %d of %d experts packed, %d -> %d bytes (%.3f)", r.Shard, r.Packed, r.Experts, r.RawBytes, r.PackedBytes, float64(r.PackedBytes)/float64(r.RawBytes))
			}
			rng := rand.New(rand.NewPCG(1, 2))
			packed, total := 0, 0
			for _, l := range expertpack.ExpertLayers(c, cfg) {
				for e := 0; e < cfg.NumRoutedExperts; e++ {
					total++
					loc, err := c.Expert(l, e, cfg)
					if err != nil {
						t.Fatal(err)
					}
					raw, err := expertpack.ReadExpert(c, loc)
					if err != nil {
						t.Fatal(err)
					}
					path := expertpack.PackPath(filepath.Join(dir, loc.Weights[0].File))
					x := packs[path]
					if x == nil {
						continue
					}
					ent, ok := x.Lookup(l, e)
					if !ok {
						continue
					}
					packed++
					rec := readRecord(t, path, ent)
					region := make([]byte, len(raw.Region))
					scales := make([]byte, len(raw.Scales))
					if err := expertpack.Decode(region, scales, rec); err != nil {
						t.Fatalf("layer %d expert %d: %v", l, e, err)
					}
					if !bytes.Equal(region, raw.Region) || !bytes.Equal(scales, raw.Scales) {
						t.Fatalf("layer %d expert %d: decoded bytes differ", l, e)
					}
					checkInPlace(t, rng, rec, ent, raw)
				}
			}
			if packed != total {
				t.Fatalf("%d of %d experts packed", packed, total)
			}
			t.Logf("%d of %d experts packed", packed, total)
		})
	}
}

// checkInPlace decodes a record in a slab as a streamed read would: the
// record at ent.SlabAt, landing in random increments.
func checkInPlace(t *testing.T, rng *rand.Rand, rec []byte, ent expertpack.Entry, raw *expertpack.Expert) {
	t.Helper()
	r, err := expertpack.ParseRecord(rec, int64(len(rec)))
	if err != nil {
		t.Fatal(err)
	}
	slab := bytes.Repeat([]byte{0xFF}, int(ent.PackedSlabNeed()))
	u, err := expertpack.NewUnpacker(r, slab, ent.SlabAt)
	if err != nil {
		t.Fatal(err)
	}
	var landed int64
	for done := false; !done || landed < int64(len(rec)); {
		n := min(int64(len(rec))-landed, 1+rng.Int64N(int64(len(rec))/3+1))
		copy(slab[ent.SlabAt+landed:], rec[landed:landed+n])
		landed += n
		done, err = u.Advance(slab, landed)
		if err != nil {
			t.Fatal(err)
		}
		if !done && landed == int64(len(rec)) {
			t.Fatal("every byte landed but the record is not decoded")
		}
	}
	if !bytes.Equal(slab[:r.RegionLen], raw.Region) {
		t.Fatal("in-place decode differs")
	}
	s := slab[ent.SlabAt+r.ScalesOff : ent.SlabAt+r.ScalesOff+r.ScalesLen]
	if !bytes.Equal(s, raw.Scales) {
		t.Fatal("scales moved")
	}
}

// TestPackResume: a second run keeps current packs; a shard that changes
// makes its pack stale, and the next run rewrites it.
func TestPackResume(t *testing.T) {
	dir := copyModel(t, "glm52-tiny")
	c, cfg := testmodel.Open(t, dir)
	ctx := context.Background()
	first, err := expertpack.PackModel(ctx, c, cfg, expertpack.Options{Force: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := expertpack.PackModel(ctx, c, cfg, expertpack.Options{Force: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var path, shard string
	for i, r := range again {
		if first[i].Path != "" && !r.Current {
			t.Fatalf("%s was packed again", r.Shard)
		}
		if r.Path != "" {
			path, shard = r.Path, r.Shard
		}
	}
	if path == "" {
		t.Fatal("nothing packed")
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, shard), later, later); err != nil {
		t.Fatal(err)
	}
	x, err := expertpack.ReadIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Check(dir); !errors.Is(err, expertpack.ErrStale) {
		t.Fatalf("changed shard: %v, want ErrStale", err)
	}
	third, err := expertpack.PackModel(ctx, c, cfg, expertpack.Options{Force: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range third {
		if r.Shard == shard && r.Current {
			t.Fatal("stale pack kept")
		}
	}
	x, err = expertpack.ReadIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Check(dir); err != nil {
		t.Fatal(err)
	}
}

// TestPackCancelled: a cancelled pack returns the context's error and
// leaves neither a pack nor a partial file.
func TestPackCancelled(t *testing.T) {
	dir := copyModel(t, "glm52-mini")
	c, cfg := testmodel.Open(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := expertpack.PackModel(ctx, c, cfg, expertpack.Options{Force: true, Workers: 2, OnExpert: func(int, int, int64, int64) {
		if n++; n == 5 {
			cancel()
		}
	}}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"+expertpack.Suffix+"*"))
	if len(left) != 0 {
		t.Fatalf("left behind %v", left)
	}
}
