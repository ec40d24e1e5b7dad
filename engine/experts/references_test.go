package experts_test

import (
	"context"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestStreamedMatchesReferences: with experts streamed through one LRU
// slot per layer (freed slabs poisoned), from the shards and from packs,
// the first refTokens tokens of every reference case's greedy
// continuation, plain and speculative, are the reference's (HF
// transformers, float64) on the demo model. (The fixtures' streamed tokens
// are checked against their resident ones in TestStreamedMatchesResident,
// and those against the references in engine/model.)
func TestStreamedMatchesReferences(t *testing.T) {
	const refTokens = 16
	for _, model := range []string{fixtures.DemoName} {
		refs, _ := fixtures.LoadRefs(t, model)
		for _, packed := range []bool{false, true} {
			name, dir := model, fixtures.ModelDir(t, model)
			if packed {
				name, dir = model+"/packed", packedModel(t, model)
			}
			t.Run(name, func(t *testing.T) {
				d, s := openStreamed(t, dir, func(set int64) experts.StreamOptions {
					o := experts.StreamOptions{CacheBytes: set, WorkingSlots: 2, Workers: 3, ReadChunk: 4096}
					if packed {
						o.Packs = experts.PacksRead
					}
					return o
				}, func(s *experts.Streamed) { experts.SetPoison(s, true) })
				m := d.Model
				for _, cs := range refs.Cases {
					for _, spec := range []bool{false, true} {
						res, err := generate.Generate(context.Background(), m, m.NewSequence(0), cs.PromptIDs, generate.Params{MaxTokens: refTokens, Speculative: spec}, nil)
						if err != nil {
							t.Fatal(err)
						}
						checkReferenceGreedy(t, cs, spec, res.Tokens)
					}
				}
				if st := s.Stats(); st.Total.Misses < int64(st.Forwards) {
					t.Errorf("%d misses over %d forwards: the budget does not force eviction", st.Total.Misses, st.Forwards)
				}
				if err := experts.CheckInvariants(s, true); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// checkReferenceGreedy compares greedy tokens with the case's reference
// continuation up to their first difference, which may only come at a
// near-tie of the reference (margin at most 1e-3, as in engine/model's
// parity tests).
func checkReferenceGreedy(t *testing.T, cs fixtures.Case, speculative bool, got []int) {
	t.Helper()
	if len(got) == 0 || len(got) > len(cs.Greedy) {
		t.Errorf("case %s speculative %v: %d tokens, want 1 to %d", cs.Label, speculative, len(got), len(cs.Greedy))
		return
	}
	for i, id := range got {
		if id != cs.Greedy[i] {
			if cs.GreedyMargins[i] > 1e-3 {
				t.Errorf("case %s speculative %v: token %d is %d, want %d (margin %.3g)\n got %v\nwant %v", cs.Label, speculative, i, id, cs.Greedy[i], cs.GreedyMargins[i], got, cs.Greedy)
			}
			return
		}
	}
}
