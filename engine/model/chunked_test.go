package model_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/internal/fixtures"
)

// longRefCase is a fixture's long reference case: past index_topk, so its
// later rows attend to a DSA selection.
func longRefCase(t *testing.T, name string, m *model.Model) (fixtures.Case, string) {
	t.Helper()
	refs, refDir := fixtures.LoadRefs(t, name)
	cs := longCase(t, refs)
	if cs.N <= m.Config().IndexTopK {
		t.Fatalf("%s: the long case has %d tokens, not past index_topk %d", name, cs.N, m.Config().IndexTopK)
	}
	return cs, refDir
}

// TestChunkedPrefillLong forwards each fixture's long prompt in chunks
// smaller and larger than the prompt, in a runner planned for the chunk,
// and checks every row's logits and every DSA selection against the
// reference.
func TestChunkedPrefillLong(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := open(t, name).Model
			cs, refDir := longRefCase(t, name, m)
			V := m.Config().VocabSize
			want := fixtures.F32File(t, filepath.Join(refDir, cs.LogitsFile), cs.N*V)
			for _, chunk := range []int{cs.N/3 + 1, cs.N + 64} {
				t.Run(fmt.Sprintf("chunk%d", chunk), func(t *testing.T) {
					r := plannedModel(t, name, model.Limits{Rows: chunk, LogitRows: chunk}).NewRunner()
					seq := m.NewSequence(0)
					worst := 0.0
					for i := 0; i < cs.N; i += chunk {
						toks := cs.PromptIDs[i:min(i+chunk, cs.N)]
						tr := &model.Trace{}
						out, err := r.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: toks, AllLogits: true}}, tr)
						if err != nil {
							t.Fatal(err)
						}
						for j, lg := range out[0].Logits {
							d, _ := fixtures.MaxAbsDiff(lg, want[(i+j)*V:(i+j+1)*V])
							worst = max(worst, d)
						}
						checkChunkDSA(t, m, cs, tr, i, len(toks))
					}
					t.Logf("max |logit diff| %.3g over %d rows", worst, cs.N)
					if worst > logitTolerance[name] {
						t.Errorf("chunked prefill logits differ by %.3g (tolerance %g)", worst, logitTolerance[name])
					}
				})
			}
		})
	}
}

// checkChunkDSA compares the selections of a chunk's rows (positions
// from..from+n-1) with the reference.
func checkChunkDSA(t *testing.T, m *model.Model, cs fixtures.Case, tr *model.Trace, from, n int) {
	t.Helper()
	K := m.Config().IndexTopK
	for ls, rows := range cs.DSA {
		l, _ := strconv.Atoi(ls)
		sel := tr.DSA[l]
		for j := range n {
			p := from + j
			if p+1 <= K {
				continue
			}
			var causal []int
			for _, s := range rows[p] {
				if s <= p {
					causal = append(causal, s)
				}
			}
			if sel == nil || len(sel[j]) != len(causal) {
				t.Errorf("layer %d row %d: no selection of %d keys", l, p, len(causal))
				continue
			}
			in := map[int]bool{}
			for _, s := range causal {
				in[s] = true
			}
			for _, s := range sel[j] {
				if !in[s] {
					t.Errorf("layer %d row %d: selected key %d is not in the reference", l, p, s)
					break
				}
			}
		}
	}
}

// plannedModel loads a fixture model whose runners have limits lim.
func plannedModel(t *testing.T, name string, lim model.Limits) *model.Model {
	t.Helper()
	d, err := loader.Open(context.Background(), fixtures.ModelDir(t, name), loader.Options{Model: model.Options{Limits: lim}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.Model
}

// TestRunnerMatchesPlan: a runner sized by a memory plan holds what the
// plan's buffer lines count (the segment's per-row state, the bounded
// scratch, the logits, the expert workers), and refuses a forward larger
// than planned, naming the plan line.
func TestRunnerMatchesPlan(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			d := open(t, name)
			w, err := plan.FromContainer(d.Container, d.Config, d.Summary)
			if err != nil {
				t.Fatal(err)
			}
			for _, opts := range []plan.Options{
				{Memory: 8 << 30, Context: 512, Threads: 3},
				{Memory: 8 << 30, Context: 2048, Sequences: 4, Segment: 100, Threads: 2},
				{Memory: 8 << 30, Context: 4096, Sequences: 2, Segment: 1500, Threads: 2},
			} {
				p, err := plan.New(d.Config, w, opts)
				if err != nil || !p.Fits {
					t.Fatalf("plan %+v: %v %v", opts, err, p.Err())
				}
				m := plannedModel(t, name, model.Limits{Rows: p.BatchRows, ScratchRows: p.ScratchRows, LogitRows: p.LogitRows, Workers: p.Threads})
				r := m.NewRunner()
				var planned int64
				for _, item := range []string{plan.ItemSegment, plan.ItemScratch, plan.ItemLogits, plan.ItemWorkers} {
					it, ok := p.Item(item)
					if !ok {
						t.Fatalf("plan has no %q line", item)
					}
					planned += it.Bytes
				}
				if got := r.BufferBytes(); got != planned {
					t.Errorf("%+v: runner holds %d bytes, the plan's lines %d", opts, got, planned)
				}
				seq := m.NewSequence(0)
				_, err = r.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: make([]int, p.BatchRows+1)}}, nil)
				if err == nil || !strings.Contains(err.Error(), plan.ItemSegment) {
					t.Errorf("a forward of %d rows past the planned %d: %v", p.BatchRows+1, p.BatchRows, err)
				}
				if seq.Len() != 0 {
					t.Errorf("refused forward left %d tokens in the cache", seq.Len())
				}
			}
		})
	}
}

// TestEngineConstants: the memory plan counts the expert workers' blocks,
// the rows whose expert outputs are kept per slot, and the scratch rows.
func TestEngineConstants(t *testing.T) {
	if model.ExpertBlockRows != plan.ExpertBlockRows {
		t.Errorf("model.ExpertBlockRows %d, plan.ExpertBlockRows %d", model.ExpertBlockRows, plan.ExpertBlockRows)
	}
	if model.ArrivalRows != plan.ArrivalRows {
		t.Errorf("model.ArrivalRows %d, plan.ArrivalRows %d", model.ArrivalRows, plan.ArrivalRows)
	}
	if model.DefaultScratchRows != plan.PrefillScratchRows {
		t.Errorf("model.DefaultScratchRows %d, plan.PrefillScratchRows %d", model.DefaultScratchRows, plan.PrefillScratchRows)
	}
}
