package generate_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixturemodel"
	"github.com/spoolhq/spool/internal/fixtures"
)

func openMini(t *testing.T) *model.Model {
	t.Helper()
	return fixturemodel.Shared(t, "glm52-mini").Model
}

func prompts(t *testing.T) [][]int {
	refs, _ := fixtures.LoadRefs(t, "glm52-mini")
	var out [][]int
	for _, c := range refs.Cases {
		out = append(out, c.PromptIDs)
	}
	return out
}

// TestSpeculativeEqualsPlain: MTP speculation must give exactly the plain
// path's tokens, greedy and sampled, and leave the cache in the same state.
func TestSpeculativeEqualsPlain(t *testing.T) {
	m := openMini(t)
	samplings := []generate.Sampling{
		{},
		{Temperature: 0.8, TopP: 0.9, Seed: 7},
		{Temperature: 1.2, TopK: 40, Seed: 99},
	}
	for _, prompt := range prompts(t) {
		for _, s := range samplings {
			p := generate.Params{MaxTokens: 40, Sampling: s, StopTokens: m.Config().EOSTokenIDs}
			plainSeq := m.NewSequence(0)
			plain, err := generate.Generate(context.Background(), m, plainSeq, prompt, p, nil)
			if err != nil {
				t.Fatal(err)
			}
			p.Speculative = true
			specSeq := m.NewSequence(0)
			spec, err := generate.Generate(context.Background(), m, specSeq, prompt, p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plain.Tokens, spec.Tokens) || plain.FinishReason != spec.FinishReason || plain.StopToken != spec.StopToken {
				t.Errorf("sampling %+v: speculative %v (%s) differs from plain %v (%s)", s, spec.Tokens, spec.FinishReason, plain.Tokens, plain.FinishReason)
			}
			if !slices.Equal(plainSeq.Tokens(), specSeq.Tokens()) {
				t.Errorf("sampling %+v: cache holds %d tokens after speculation, %d after plain", s, specSeq.Len(), plainSeq.Len())
			}
			if spec.DraftsProposed == 0 {
				t.Errorf("no drafts proposed")
			}
			t.Logf("temp %.1f: %d tokens, %d/%d drafts accepted", s.Temperature, len(spec.Tokens), spec.DraftsAccepted, spec.DraftsProposed)
		}
	}
}

func TestStopsAndLimits(t *testing.T) {
	m := openMini(t)
	prompt := prompts(t)[0]
	ctx := context.Background()
	ref, err := generate.Generate(ctx, m, m.NewSequence(0), prompt, generate.Params{MaxTokens: 12}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ref.FinishReason != generate.FinishLength || len(ref.Tokens) != 12 {
		t.Fatalf("finish %q with %d tokens", ref.FinishReason, len(ref.Tokens))
	}
	for _, spec := range []bool{false, true} {
		// Stopping on the 5th greedy token.
		res, err := generate.Generate(ctx, m, m.NewSequence(0), prompt, generate.Params{MaxTokens: 12, StopTokens: []int{ref.Tokens[4]}, Speculative: spec}, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := slices.Index(ref.Tokens, ref.Tokens[4])
		if res.FinishReason != generate.FinishStop || res.StopToken != ref.Tokens[4] || !slices.Equal(res.Tokens, ref.Tokens[:first]) {
			t.Errorf("speculative=%v: stop gave %v (%s, stop %d)", spec, res.Tokens, res.FinishReason, res.StopToken)
		}
		// The context limit ends generation with "length".
		seq := m.NewSequence(len(prompt) + 3)
		res, err = generate.Generate(ctx, m, seq, prompt, generate.Params{MaxTokens: 12, Speculative: spec}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.FinishReason != generate.FinishLength || len(res.Tokens) != 4 || !slices.Equal(res.Tokens, ref.Tokens[:4]) {
			t.Errorf("speculative=%v: context limit gave %v (%s)", spec, res.Tokens, res.FinishReason)
		}
		if seq.Len() > seq.Limit() {
			t.Errorf("cache grew past its limit: %d > %d", seq.Len(), seq.Limit())
		}
	}
	// A prompt longer than the context is refused.
	_, err = generate.Generate(ctx, m, m.NewSequence(4), prompt, generate.Params{MaxTokens: 1}, nil)
	var ce *kvcache.ContextError
	if !errors.As(err, &ce) {
		t.Errorf("overlong prompt: %v, want a context error", err)
	}
	for _, p := range []generate.Params{{MaxTokens: 0}, {MaxTokens: 1, Sampling: generate.Sampling{Temperature: -1}}, {MaxTokens: 1, Sampling: generate.Sampling{TopP: 2}}} {
		if _, err := generate.Generate(ctx, m, m.NewSequence(0), prompt, p, nil); err == nil {
			t.Errorf("params %+v accepted", p)
		}
	}
	if _, err := generate.Generate(ctx, m, m.NewSequence(0), nil, generate.Params{MaxTokens: 1}, nil); err == nil {
		t.Error("empty prompt accepted")
	}
	if _, err := generate.Generate(ctx, m, m.NewSequence(0), []int{1 << 20}, generate.Params{MaxTokens: 1}, nil); err == nil {
		t.Error("out-of-vocabulary prompt accepted")
	}
}

// TestPrefixReuse: a second turn on the same sequence reuses the cached
// prefix and gives the tokens a fresh sequence gives. With speculation the
// MTP cache continues too: the last reused token is forwarded again (its
// hidden state is the MTP layer's next input) and the drafts are those of
// a fresh run.
func TestPrefixReuse(t *testing.T) {
	m := openMini(t)
	ctx := context.Background()
	prompt := prompts(t)[0]
	for _, spec := range []bool{false, true} {
		seq := m.NewSequence(0)
		p := generate.Params{MaxTokens: 6, Speculative: spec}
		first, err := generate.Generate(ctx, m, seq, prompt, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		turn2 := slices.Concat(prompt, first.Tokens, []int{39, 40})
		again, err := generate.Generate(ctx, m, seq, turn2, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := len(prompt) + len(first.Tokens) - 1
		if spec {
			want--
		}
		if again.CachedTokens != want {
			t.Errorf("speculative=%v: %d cached tokens reused, want %d", spec, again.CachedTokens, want)
		}
		fresh, err := generate.Generate(ctx, m, m.NewSequence(0), turn2, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(again.Tokens, fresh.Tokens) {
			t.Errorf("speculative=%v: reused prefix gave %v, fresh %v", spec, again.Tokens, fresh.Tokens)
		}
		if again.DraftsProposed != fresh.DraftsProposed || again.DraftsAccepted != fresh.DraftsAccepted {
			t.Errorf("speculative=%v: drafts %d/%d after reuse, %d/%d fresh", spec, again.DraftsAccepted, again.DraftsProposed, fresh.DraftsAccepted, fresh.DraftsProposed)
		}
	}
}

func TestCallbackErrorStops(t *testing.T) {
	m := openMini(t)
	boom := errors.New("client went away")
	n := 0
	res, err := generate.Generate(context.Background(), m, m.NewSequence(0), prompts(t)[0], generate.Params{MaxTokens: 20}, func(int) error {
		n++
		if n == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || len(res.Tokens) != 3 {
		t.Errorf("err %v after %d tokens", err, len(res.Tokens))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := generate.Generate(ctx, m, m.NewSequence(0), prompts(t)[0], generate.Params{MaxTokens: 20}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestSampler(t *testing.T) {
	logits := []float32{1, 3, 2, float32(math.NaN()), 3}
	if got := generate.Argmax(logits); got != 1 {
		t.Errorf("argmax %d, want 1 (first of the ties, NaN skipped)", got)
	}
	if got := generate.NewSampler(generate.Sampling{Temperature: 1, TopK: 1, Seed: 3}).Sample(logits); got != 1 {
		t.Errorf("top_k 1 sampled %d, want the argmax", got)
	}
	// Same seed, same stream; frequencies follow softmax(logits / T).
	l2 := []float32{0, float32(math.Log(3))}
	a, b := generate.NewSampler(generate.Sampling{Temperature: 1, Seed: 42}), generate.NewSampler(generate.Sampling{Temperature: 1, Seed: 42})
	ones := 0
	const n = 20000
	for range n {
		x, y := a.Sample(l2), b.Sample(l2)
		if x != y {
			t.Fatal("same seed gave different samples")
		}
		ones += x
	}
	if f := float64(ones) / n; math.Abs(f-0.75) > 0.02 {
		t.Errorf("P(1) = %.3f, want 0.75", f)
	}
	// top_p keeps the crossing token only.
	l3 := []float32{float32(math.Log(0.6)), float32(math.Log(0.3)), float32(math.Log(0.1))}
	s := generate.NewSampler(generate.Sampling{Temperature: 1, TopP: 0.8, Seed: 1})
	for range 2000 {
		if s.Sample(l3) == 2 {
			t.Fatal("top_p 0.8 sampled a token outside the nucleus")
		}
	}
}
