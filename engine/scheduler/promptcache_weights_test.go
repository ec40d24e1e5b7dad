package scheduler_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/fixtures"
)

// scaleWeight multiplies one element of an F32 tensor of the model in dir
// in place: the headers stay as they were.
func scaleWeight(t *testing.T, dir, tensor string, elem int, by float32) {
	t.Helper()
	d, err := loader.OpenHeaders(dir)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := d.Container.Tensor(tensor)
	d.Close()
	if !ok || ti.DType != "F32" {
		t.Fatalf("%s: %+v", tensor, ti)
	}
	f, err := os.OpenFile(filepath.Join(dir, ti.File), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [4]byte
	off := ti.Offset + int64(4*elem)
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(b[:])) * by
	binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// TestPromptCacheOtherWeightsMiss: a model with the same layout and other
// weights (one norm weight changed, as a fine-tune or a re-published
// checkpoint differs) shares no block with the first one's cache: its
// prompt restores nothing and gives the tokens of its own run without a
// cache. A copy of the same weights elsewhere does hit.
func TestPromptCacheOtherWeightsMiss(t *testing.T) {
	ctx := context.Background()
	const name = "glm52-tiny"
	refs, _ := fixtures.LoadRefs(t, name)
	prompt := refs.Cases[len(refs.Cases)-1].PromptIDs
	B := promptcache.DefaultBlockTokens
	if len(prompt) < 2*B {
		t.Fatalf("the long case has %d tokens", len(prompt))
	}
	src := fixtures.Path(t, name)
	first, same, tuned := fixtures.CopyModel(t, src), fixtures.CopyModel(t, src), fixtures.CopyModel(t, src)
	scaleWeight(t, tuned, "model.layers.0.input_layernorm.weight", 3, 1.5)
	cacheDir := t.TempDir()
	p := generate.Params{MaxTokens: 8}

	// run generates prompt on the model in dir with the shared prompt
	// cache; it returns the tokens, those of the model's run without a
	// cache, and how many prompt tokens came from the cache.
	run := func(dir string) (got, scratch []int, cached int) {
		t.Helper()
		d, err := loader.Open(ctx, dir, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		m := d.Model
		ref, err := generate.Generate(ctx, m, m.NewSequence(0), prompt, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := promptcache.IdentityOf(context.Background(), d, "test", fingerprint.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cache, err := promptcache.New(promptcache.Options{Identity: id, Dir: cacheDir, DiskBytes: 1 << 30, MinFreeBytes: -1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s, stop := startStoppable(m, scheduler.Config{PromptCache: cache, IdleSequences: -1})
		st, err := s.Submit(ctx, scheduler.Request{Prompt: prompt, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		toks, res := collect(t, st)
		stop()
		if err := cache.Close(); err != nil { // every block reaches the disk tier
			t.Fatal(err)
		}
		return ids(toks), ref.Tokens, res.CachedTokens
	}

	got, scratch, cached := run(first)
	if cached != 0 || !slices.Equal(got, scratch) {
		t.Fatalf("first model: %d cached, %v, without a cache %v", cached, got, scratch)
	}
	got, scratch, cached = run(tuned)
	if cached != 0 {
		t.Errorf("a model with another norm weight restored %d tokens of the first one's cache", cached)
	}
	if !slices.Equal(got, scratch) {
		t.Errorf("a model with another norm weight: %v, its own run without a cache %v", got, scratch)
	}
	got, scratch, cached = run(same)
	if cached < len(prompt)/B*B-B || !slices.Equal(got, scratch) {
		t.Errorf("a copy of the first model: %d cached (want about %d), %v, without a cache %v", cached, len(prompt)/B*B, got, scratch)
	}
}
