package promptcache_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/internal/fixturemodel"
	"github.com/spoolhq/spool/internal/fixtures"
)

// fixtureModels are the shared fixtures and the committed demo model.
var fixtureModels = []string{"glm52-tiny", "glm52-mini", fixtures.DemoName}

func openModel(t testing.TB, name string) *loader.Dir {
	t.Helper()
	return fixturemodel.Shared(t, name)
}

// longPrompt is the fixture's longest reference prompt, which must be past
// index_topk (so DSA selects keys) and span blocks.
func longPrompt(t testing.TB, name string, d *loader.Dir) []int {
	t.Helper()
	refs, _ := fixtures.LoadRefs(t, name)
	var long []int
	for _, c := range refs.Cases {
		if len(c.PromptIDs) > len(long) {
			long = c.PromptIDs
		}
	}
	if len(long) <= d.Config.IndexTopK || len(long) < 2*promptcache.DefaultBlockTokens {
		t.Fatalf("%s: the longest reference prompt has %d tokens, not past index_topk %d and two blocks", name, len(long), d.Config.IndexTopK)
	}
	return long
}

func newCache(t testing.TB, d *loader.Dir, dir string, memory int64) *promptcache.Cache {
	t.Helper()
	id, err := promptcache.IdentityOf(context.Background(), d, "test", fingerprint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := promptcache.Options{Identity: id, MemoryBytes: memory, Dir: dir, DiskBytes: 1 << 30, MinFreeBytes: -1, Logger: slog.New(slog.DiscardHandler)}
	c, err := promptcache.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// prefill forwards prompt in two chunks and lets the MTP layer absorb
// every position whose next token is known (rows 0..len-2, in two chunks),
// as a decode core with chunked MTP does. It returns the hidden states of
// every position.
func prefill(t testing.TB, m *model.Model, seq *kvcache.Sequence, prompt []int) [][]float32 {
	t.Helper()
	ctx := context.Background()
	var hidden [][]float32
	cut := len(prompt) / 2
	for _, chunk := range [][]int{prompt[:cut], prompt[cut:]} {
		out, err := m.Forward(ctx, []model.Request{{Seq: seq, Tokens: chunk}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		hidden = append(hidden, cloneRows(out[0].Hidden)...)
	}
	if m.HasMTP() {
		n := len(prompt) - 1
		for _, r := range [][2]int{{0, n / 3}, {n / 3, n}} {
			if _, _, err := m.MTPForward(ctx, model.MTPRequest{Seq: seq, Pos: r[0], Hidden: hidden[r[0]:r[1]], Next: prompt[r[0]+1 : r[1]+1]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return hidden
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func sameBits(t *testing.T, what string, a, b [][]float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d rows vs %d", what, len(a), len(b))
	}
	for i := range a {
		if !bitsEqual(a[i], b[i]) {
			t.Fatalf("%s: row %d differs", what, i)
		}
	}
}

// TestRestoredStateIsExact: on both fixtures, with DSA active (a prompt
// past index_topk) and MTP state, a sequence restored from blocks (from
// memory, and from disk after a restart) holds the computed state bit for
// bit, and continuing both with model.Forward and MTPForward gives the same
// logits bit for bit.
func TestRestoredStateIsExact(t *testing.T) {
	for _, name := range fixtureModels {
		t.Run(name, func(t *testing.T) {
			d := openModel(t, name)
			m := d.Model
			if !m.HasDSA() || !m.HasMTP() {
				t.Fatalf("%s: DSA %v, MTP %v; the test needs both", name, m.HasDSA(), m.HasMTP())
			}
			prompt := longPrompt(t, name, d)
			dir := t.TempDir()
			c := newCache(t, d, dir, 64<<20)
			ctx := context.Background()
			orig := m.NewSequence(0)
			hidden := prefill(t, m, orig, prompt)
			st := c.Store(ctx, orig, promptcache.Hidden{From: 0, Rows: hidden})
			if want := len(prompt) / c.BlockTokens() * c.BlockTokens(); st.Tokens != want {
				t.Fatalf("stored %d tokens, want %d", st.Tokens, want)
			}
			// The next turn continues with the token the model predicts.
			next := append(slices.Clone(prompt), 3)
			for _, tier := range []string{"memory", "disk"} {
				t.Run(tier, func(t *testing.T) {
					if tier == "disk" {
						c.Close()
						c = newCache(t, d, dir, 0) // a restart: only the disk tier
					}
					restored := m.NewSequence(0)
					r, err := c.Restore(ctx, restored, c.Lookup(next))
					if err != nil {
						t.Fatal(err)
					}
					if r.Tokens != st.Tokens || !r.MTP || (tier == "disk") != (r.FromDisk == r.Tokens) {
						t.Fatalf("restored %+v", r)
					}
					// The computed sequence, cut to the restored prefix.
					want := m.NewSequence(0)
					wantHidden := prefill(t, m, want, prompt)
					want.Trim(r.Tokens)
					want.TrimMTP(r.Tokens - 1)
					sameSequence(t, restored, want)
					if !bitsEqual(r.Hidden, wantHidden[r.Tokens-1]) {
						t.Fatal("the restored hidden state differs")
					}
					continueBoth(t, m, want, restored, next, wantHidden[r.Tokens-1], r.Hidden)
				})
			}
		})
	}
}

func sameSequence(t *testing.T, a, b *kvcache.Sequence) {
	t.Helper()
	if !slices.Equal(a.Tokens(), b.Tokens()) {
		t.Fatal("tokens differ")
	}
	for l := range a.Geometry().Layers {
		x, y := a.Layer(l), b.Layer(l)
		if x.Len() != y.Len() || !bitsEqual(x.KV(0, x.Len(), nil), y.KV(0, y.Len(), nil)) || (l < len(a.Geometry().Indexer) && a.Geometry().Indexer[l] && !bitsEqual(x.Index(0, x.Len(), nil), y.Index(0, y.Len(), nil))) {
			t.Fatalf("layer %d state differs", l)
		}
	}
	if a.MTP().Len() != b.MTP().Len() || !bitsEqual(a.MTP().KV(0, a.MTP().Len(), nil), b.MTP().KV(0, b.MTP().Len(), nil)) {
		t.Fatalf("MTP state differs: %d rows vs %d", a.MTP().Len(), b.MTP().Len())
	}
}

// continueBoth forwards the rest of full and then greedy tokens into both
// sequences, with the MTP layer absorbing as it goes (pendA, pendB: the
// hidden state of the last cached position), and requires every logit of
// both to be bit-identical.
func continueBoth(t *testing.T, m *model.Model, a, b *kvcache.Sequence, full []int, pendA, pendB []float32) {
	t.Helper()
	ctx := context.Background()
	seqs := []*kvcache.Sequence{a, b}
	pend := [][][]float32{{pendA}, {pendB}}
	tokens := full[a.Len():]
	for step := range 6 {
		var logits, mtpLogits [2][][]float32
		for i, seq := range seqs {
			pos := seq.Len()
			out, err := m.Forward(ctx, []model.Request{{Seq: seq, Tokens: tokens, AllLogits: true}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			logits[i] = cloneRows(out[0].Logits)
			hid := cloneRows(out[0].Hidden)
			// MTP rows pos-1 .. pos+len-2 pair the pending hidden states
			// with the tokens just forwarded.
			h := append(pend[i], hid[:len(tokens)-1]...)
			mtpLogits[i], _, err = m.MTPForward(ctx, model.MTPRequest{Seq: seq, Pos: pos - 1, Hidden: h, Next: tokens})
			if err != nil {
				t.Fatal(err)
			}
			mtpLogits[i] = cloneRows(mtpLogits[i])
			pend[i] = hid[len(tokens)-1:]
		}
		sameBits(t, fmt.Sprintf("step %d logits", step), logits[0], logits[1])
		sameBits(t, fmt.Sprintf("step %d MTP logits", step), mtpLogits[0], mtpLogits[1])
		tokens = []int{generate.Argmax(logits[0][len(logits[0])-1])}
	}
	sameSequence(t, a, b)
}

// TestGenerateFromRestoredPrefix: generate.Generate continuing a restored
// prefix gives exactly the tokens it gives from scratch, greedy and seeded,
// with and without MTP speculation, from memory and from disk.
func TestGenerateFromRestoredPrefix(t *testing.T) {
	for _, name := range fixtureModels {
		t.Run(name, func(t *testing.T) {
			d := openModel(t, name)
			m := d.Model
			prompt := longPrompt(t, name, d)
			ctx := context.Background()
			dir := t.TempDir()
			c := newCache(t, d, dir, 64<<20)
			// A first request leaves its state in the cache.
			first := m.NewSequence(0)
			if _, err := generate.Generate(ctx, m, first, prompt, generate.Params{MaxTokens: 1}, nil); err != nil {
				t.Fatal(err)
			}
			c.Store(ctx, first, promptcache.Hidden{})
			for _, tier := range []string{"memory", "disk"} {
				if tier == "disk" {
					c.Close()
					c = newCache(t, d, dir, 0)
				}
				for _, s := range []generate.Sampling{{}, {Temperature: 0.9, TopP: 0.95, Seed: 11}} {
					for _, spec := range []bool{false, true} {
						p := generate.Params{MaxTokens: 24, Sampling: s, Speculative: spec}
						scratch, err := generate.Generate(ctx, m, m.NewSequence(0), prompt, p, nil)
						if err != nil {
							t.Fatal(err)
						}
						seq := m.NewSequence(0)
						r, err := c.Restore(ctx, seq, c.Lookup(prompt))
						if err != nil {
							t.Fatal(err)
						}
						warm, err := generate.Generate(ctx, m, seq, prompt, p, nil)
						if err != nil {
							t.Fatal(err)
						}
						if r.Tokens == 0 || warm.CachedTokens != r.Tokens {
							t.Fatalf("%s: restored %d tokens, generate reused %d", tier, r.Tokens, warm.CachedTokens)
						}
						if !slices.Equal(warm.Tokens, scratch.Tokens) || warm.FinishReason != scratch.FinishReason {
							t.Errorf("%s, sampling %+v, speculative %v: %v from the cache, %v from scratch", tier, s, spec, warm.Tokens, scratch.Tokens)
						}
					}
				}
			}
		})
	}
}

// cloneRows copies forward outputs, which are views of the runner's buffers
// valid only until its next forward.
func cloneRows(rows [][]float32) [][]float32 {
	out := make([][]float32, len(rows))
	for i, r := range rows {
		out[i] = append([]float32(nil), r...)
	}
	return out
}
