package grammar

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestRandomWalks picks random allowed tokens of the fixture tokenizer and
// checks that every output stays a JSON prefix and that every completed
// output validates against the schema (an independent validator). The pick
// favours tokens that close things, so that walks finish.
func TestRandomWalks(t *testing.T) {
	_, v := fixtureVocab(t)
	const walks, maxSteps = 12, 400
	for ci, c := range schemaCases {
		t.Run(c.name, func(t *testing.T) {
			g := compileFor(t, c.schema)
			validate := validator(t, c.schema)
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			mask := make([]uint64, v.MaskWords())
			completed := 0
			for w := range walks {
				m := g.NewMatcher(v)
				var out []byte
				for step := 0; step < maxSteps && !m.Ended(); step++ {
					m.Allowed(mask)
					ids := allowedIDs(mask, v.Size())
					if len(ids) == 0 {
						t.Fatalf("walk %d: no token allowed after %q", w, out)
					}
					id := pick(rng, v, ids, m.Done())
					if err := m.Accept(id); err != nil {
						t.Fatalf("walk %d: allowed token %d refused after %q: %v", w, id, out, err)
					}
					if m.Ended() {
						break
					}
					out = append(out, v.tokens[id]...)
					if !validPrefix(out) {
						t.Fatalf("walk %d: %q is not a JSON prefix", w, out)
					}
				}
				if !m.Ended() {
					continue
				}
				completed++
				if completed == 1 {
					t.Logf("sample: %q", out)
				}
				if err := validate(out); err != nil {
					t.Errorf("walk %d: %q does not validate: %v", w, out, err)
				}
			}
			if completed < walks/2 {
				t.Errorf("only %d of %d walks completed within %d tokens", completed, walks, maxSteps)
			}
		})
	}
}

// pick chooses a token: EOS when allowed, else often one that closes a
// string, object or array or separates members, else any.
func pick(rng *rand.Rand, v *Vocab, ids []int, done bool) int {
	if done {
		for _, id := range ids {
			for _, e := range v.eos {
				if id == e {
					return id
				}
			}
		}
	}
	if rng.IntN(2) == 0 {
		var closers []int
		for _, id := range ids {
			if bytes.ContainsAny(v.tokens[id], "\"]}") {
				closers = append(closers, id)
			}
		}
		if len(closers) > 0 {
			return closers[rng.IntN(len(closers))]
		}
	}
	return ids[rng.IntN(len(ids))]
}
