package generate_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/model"
)

// TestEmbedIsPooledFinalHidden: an embedding is the L2-normalised mean of
// the prompt's final-normed hidden states, computed here from one plain
// forward; it is the same bits from a sequence holding the prompt already
// (nothing is reused), and chunking moves it only by float rounding.
func TestEmbedIsPooledFinalHidden(t *testing.T) {
	m := openMini(t)
	H := m.Config().HiddenSize
	for _, prompt := range prompts(t) {
		outs, err := m.Forward(context.Background(), []model.Request{{Seq: m.NewSequence(0), Tokens: prompt}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, H)
		for _, h := range outs[0].Hidden {
			for i, v := range h {
				want[i] += float64(v) / float64(len(prompt))
			}
		}
		var norm float64
		for _, v := range want {
			norm += v * v
		}
		norm = math.Sqrt(norm)

		seq := m.NewSequence(0)
		res, err := generate.Generate(context.Background(), m, seq, prompt, generate.Params{Embed: true}, func(int) error {
			t.Fatal("an embedding generated a token")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Embedding) != H || len(res.Tokens) != 0 || res.CachedTokens != 0 {
			t.Fatalf("embedding of %d values, %d tokens, %d cached; want %d, 0, 0", len(res.Embedding), len(res.Tokens), res.CachedTokens, H)
		}
		var sq float64
		for i, v := range res.Embedding {
			sq += float64(v) * float64(v)
			if w := float32(want[i] / norm); v != w {
				t.Fatalf("embedding[%d] = %v, want %v", i, v, w)
			}
		}
		if math.Abs(math.Sqrt(sq)-1) > 1e-6 {
			t.Errorf("|embedding| = %v, want 1", math.Sqrt(sq))
		}

		// The sequence now holds the prompt: a second embedding forwards it all again.
		again, err := generate.Generate(context.Background(), m, seq, prompt, generate.Params{Embed: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(again.Embedding, res.Embedding) || again.CachedTokens != 0 {
			t.Errorf("re-embedding on a warm sequence: cached %d, equal %v", again.CachedTokens, slices.Equal(again.Embedding, res.Embedding))
		}

		chunked, err := generate.Generate(context.Background(), m, m.NewSequence(0), prompt, generate.Params{Embed: true, PrefillChunk: 3}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range chunked.Embedding {
			if d := math.Abs(float64(chunked.Embedding[i] - res.Embedding[i])); d > 1e-4 {
				t.Fatalf("chunked embedding[%d] = %v, unchunked %v", i, chunked.Embedding[i], res.Embedding[i])
			}
		}
	}
}
