package generate_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/internal/fixtures"
)

const marginFloor = 1e-3

var fixtureModels sync.Map // name/limits -> *loader.Dir

// openLimited loads a fixture model whose runners have limits lim, once
// per test binary.
func openLimited(t *testing.T, name string, lim model.Limits) *model.Model {
	t.Helper()
	return openDir(t, name, lim).Model
}

// openDir is openLimited's model directory.
func openDir(t *testing.T, name string, lim model.Limits) *loader.Dir {
	t.Helper()
	key := fmt.Sprintf("%s/%+v", name, lim)
	if d, ok := fixtureModels.Load(key); ok {
		return d.(*loader.Dir)
	}
	d, err := loader.Open(context.Background(), fixtures.ModelDir(t, name), loader.Options{Model: model.Options{Limits: lim}})
	if err != nil {
		t.Fatal(err)
	}
	fixtureModels.Store(key, d)
	return d
}

// TestLongPromptChunks generates from each fixture's (and the demo's) long
// prompt (past index_topk) with prefill chunks smaller and larger than the
// prompt, in runners planned for exactly that chunk: the greedy tokens
// follow the reference wherever its margin allows, speculation (whose MTP
// prompt pass must fit the same chunk) gives the plain tokens, and every
// chunk size gives the same tokens.
func TestLongPromptChunks(t *testing.T) {
	for _, name := range []string{"glm52-tiny", "glm52-mini", fixtures.DemoName} {
		t.Run(name, func(t *testing.T) {
			refs, _ := fixtures.LoadRefs(t, name)
			cs := refs.Cases[len(refs.Cases)-1]
			var first []int
			for _, chunk := range []int{cs.N/3 + 1, cs.N + 64} {
				m := openLimited(t, name, model.Limits{Rows: chunk, LogitRows: 2})
				if cs.N <= m.Config().IndexTopK {
					t.Fatalf("the long case has %d tokens, not past index_topk %d", cs.N, m.Config().IndexTopK)
				}
				for _, spec := range []bool{false, true} {
					p := generate.Params{MaxTokens: len(cs.Greedy), PrefillChunk: chunk, Speculative: spec}
					res, err := generate.Generate(context.Background(), m, m.NewSequence(0), cs.PromptIDs, p, nil)
					if err != nil {
						t.Fatalf("chunk %d speculative %v: %v", chunk, spec, err)
					}
					if want := (cs.N + chunk - 1) / chunk; res.PrefillChunks != want {
						t.Errorf("chunk %d: %d prefill chunks, want %d", chunk, res.PrefillChunks, want)
					}
					if first == nil {
						first = res.Tokens
						compared := 0
						for i, want := range cs.Greedy {
							if res.Tokens[i] != want {
								if cs.GreedyMargins[i] > marginFloor {
									t.Errorf("greedy token %d: %d, want %d (margin %.3g)", i, res.Tokens[i], want, cs.GreedyMargins[i])
								}
								break
							}
							compared++
						}
						t.Logf("%d of %d greedy tokens equal the reference", compared, len(cs.Greedy))
					} else if !slices.Equal(res.Tokens, first) {
						t.Errorf("chunk %d speculative %v: %v, want %v", chunk, spec, res.Tokens, first)
					}
					if spec && m.HasMTP() && res.DraftsProposed == 0 {
						t.Errorf("chunk %d: no drafts", chunk)
					}
				}
			}
		})
	}
}

// TestPrefillProgress: OnPrefill starts at the reused tokens, rises after
// every layer of every chunk and ends at the prompt length.
func TestPrefillProgress(t *testing.T) {
	m := openMini(t)
	prompt := prompts(t)[2]
	layers := m.Config().NumLayers
	for _, reuse := range []bool{false, true} {
		seq := m.NewSequence(0)
		if reuse {
			if _, err := generate.Generate(context.Background(), m, seq, prompt[:50], generate.Params{MaxTokens: 1}, nil); err != nil {
				t.Fatal(err)
			}
		}
		var got [][2]int
		p := generate.Params{MaxTokens: 2, PrefillChunk: 40, OnPrefill: func(done, total int) { got = append(got, [2]int{done, total}) }}
		res, err := generate.Generate(context.Background(), m, seq, prompt, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		chunks := (len(prompt) - res.CachedTokens + 39) / 40
		if len(got) != 1+chunks*layers {
			t.Errorf("reuse %v: %d reports, want 1 + %d chunks x %d layers", reuse, len(got), chunks, layers)
		}
		if got[0][0] != res.CachedTokens || got[len(got)-1][0] != len(prompt) {
			t.Errorf("reuse %v: reports go from %v to %v, want %d to %d", reuse, got[0], got[len(got)-1], res.CachedTokens, len(prompt))
		}
		for i, g := range got {
			if g[1] != len(prompt) || (i > 0 && g[0] < got[i-1][0]) {
				t.Fatalf("reuse %v: report %d %v after %v", reuse, i, g, got[max(i-1, 0)])
			}
		}
		if reuse && res.CachedTokens == 0 {
			t.Error("no prefix reused")
		}
	}
}

// TestEngineConstants: the memory plan counts the decode core's pending
// MTP states.
func TestEngineConstants(t *testing.T) {
	if generate.MaxPendingMTP != plan.MTPPendingRows {
		t.Errorf("generate.MaxPendingMTP %d, plan.MTPPendingRows %d", generate.MaxPendingMTP, plan.MTPPendingRows)
	}
}
