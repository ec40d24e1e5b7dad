package model_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/internal/fixtures"
)

// smallTiles shrinks every attention tile, segment and block so that the
// fixtures' long prompts (41 and 136 tokens, past index_topk 12 and 96)
// cross many tile, segment and block boundaries: the expanded form walks
// 8-key tiles in 16-row blocks, the latent form splits a row's keys into
// up to 4 segments of whole 8-key tiles, and the indexer scores 8 keys at
// a time into its top-k heap.
func smallTiles(l *plan.AttentionLayout) {
	l.LatentTile, l.ExpandedTile, l.IndexerTile = 8, 8, 8
	l.MinSegment, l.MaxSegments = 16, 4
	l.BlockRows = 16
	l.Threads = 3
}

func longCase(t *testing.T, refs *fixtures.Refs) fixtures.Case {
	t.Helper()
	for _, cs := range refs.Cases {
		if cs.Label == "long" {
			return cs
		}
	}
	t.Fatal("the fixture has no long case")
	return fixtures.Case{}
}

// prefill runs prompt through m in forwards of chunk tokens (the whole
// prompt when chunk is 0) and returns every row's logits and the DSA
// selections per layer and position.
func prefill(t *testing.T, m *model.Model, prompt []int, chunk int) ([][]float32, map[int][][]int) {
	t.Helper()
	if chunk == 0 {
		chunk = len(prompt)
	}
	seq := m.NewSequence(0)
	var logits [][]float32
	dsa := map[int][][]int{}
	for i := 0; i < len(prompt); i += chunk {
		tr := &model.Trace{}
		out, err := m.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: prompt[i:min(i+chunk, len(prompt))], AllLogits: true}}, tr)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range out[0].Logits { // views of the runner's buffers
			logits = append(logits, slices.Clone(row))
		}
		for l, rows := range tr.DSA {
			for j := range out[0].Logits {
				var keys []int
				if rows != nil {
					keys = rows[j]
				}
				dsa[l] = append(dsa[l], keys)
			}
		}
	}
	return logits, dsa
}

// TestLongPathsMatchReferences pins the long references (past index_topk)
// on both fixtures through every attention path: the expanded form's
// tiles and row blocks (whole-prompt and chunked prefill), the latent form
// with DSA rows visiting only their selected keys (tiles, segments merged
// in order, the decode batch and the one-row-per-worker path), and the
// same with every key computed and the selection applied as a mask. The
// logits stay within the fixture tolerance, the DSA selections are exact,
// and sparse and all-keys attention agree closely.
func TestLongPathsMatchReferences(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := open(t, name).Model
			refs, refDir := fixtures.LoadRefs(t, name)
			cs := longCase(t, refs)
			if cs.N <= m.Config().IndexTopK {
				t.Fatalf("the long case has %d tokens, not past index_topk %d", cs.N, m.Config().IndexTopK)
			}
			V := m.Config().VocabSize
			want := fixtures.F32File(t, filepath.Join(refDir, cs.LogitsFile), cs.N*V)
			for _, tiles := range []string{"default", "small"} {
				for _, chunk := range []int{0, 1, 3, 5, 17} {
					t.Run(fmt.Sprintf("%s-tiles/chunk%d", tiles, chunk), func(t *testing.T) {
						if tiles == "small" {
							t.Cleanup(model.SetAttentionLayout(m, smallTiles))
						}
						sparse, sel := prefill(t, m, cs.PromptIDs, chunk)
						checkLogits(t, "sparse", sparse, want, V, logitTolerance[name])
						checkSelections(t, m, cs, sel)

						restore := model.SetComputeAllKeys(m, true)
						all, allSel := prefill(t, m, cs.PromptIDs, chunk)
						restore()
						checkLogits(t, "all keys", all, want, V, logitTolerance[name])
						checkSelections(t, m, cs, allSel)
						worst := 0.0
						for i := range sparse {
							d, _ := fixtures.MaxAbsDiff(sparse[i], all[i])
							worst = max(worst, d)
						}
						t.Logf("sparse vs all keys: max |logit diff| %.3g", worst)
						if worst > logitTolerance[name] {
							t.Errorf("sparse and all-keys attention differ by %.3g", worst)
						}
					})
				}
			}
		})
	}
}

func checkLogits(t *testing.T, what string, got [][]float32, want []float32, V int, tol float64) {
	t.Helper()
	worst, at := 0.0, 0
	for i, row := range got {
		if d, _ := fixtures.MaxAbsDiff(row, want[i*V:(i+1)*V]); d > worst {
			worst, at = d, i
		}
	}
	t.Logf("%s: max |logit diff| %.3g at row %d", what, worst, at)
	if worst > tol {
		t.Errorf("%s: logits differ by %.3g at row %d (tolerance %g)", what, worst, at, tol)
	}
}

// checkSelections requires the DSA selection of every row past index_topk
// to equal the reference, and every other row to attend densely.
func checkSelections(t *testing.T, m *model.Model, cs fixtures.Case, got map[int][][]int) {
	t.Helper()
	K := m.Config().IndexTopK
	for ls, rows := range cs.DSA {
		l, _ := strconv.Atoi(ls)
		if len(got[l]) != cs.N {
			t.Errorf("layer %d: %d traced rows, want %d", l, len(got[l]), cs.N)
			continue
		}
		for p, ref := range rows {
			if p+1 <= K {
				if got[l][p] != nil {
					t.Errorf("layer %d row %d: a selection with only %d keys", l, p, p+1)
				}
				continue
			}
			want := slices.Clone(ref)
			slices.Sort(want)
			if !slices.Equal(got[l][p], want) {
				t.Errorf("layer %d row %d: selection differs\n got %v\nwant %v", l, p, got[l][p], want)
			}
		}
	}
}

// TestMTPThroughSmallTiles runs the MTP layer's dense attention over the
// whole prompt through 8-key tiles and 16-row blocks.
func TestMTPThroughSmallTiles(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := open(t, name).Model
			refs, _ := fixtures.LoadRefs(t, name)
			cs := longCase(t, refs)
			t.Cleanup(model.SetAttentionLayout(m, smallTiles))
			checkMTP(t, m, cs, logitTolerance[name])
		})
	}
}

// TestDSAScoresMatchReferences compares the indexer's raw scores of every
// row and causal key with the references' dsa_scores.
func TestDSAScoresMatchReferences(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := open(t, name).Model
			refs, refDir := fixtures.LoadRefs(t, name)
			compared := 0
			for _, cs := range refs.Cases {
				if len(cs.DSAScores) == 0 {
					continue
				}
				t.Run(cs.Label, func(t *testing.T) {
					if cs.DSABoundaryTies == nil || *cs.DSABoundaryTies != 0 {
						t.Fatalf("the reference reports ties at the top-k boundary (%v)", cs.DSABoundaryTies)
					}
					tr := &model.Trace{}
					if _, err := m.Forward(context.Background(), []model.Request{{Seq: m.NewSequence(0), Tokens: cs.PromptIDs}}, tr); err != nil {
						t.Fatal(err)
					}
					for ls, f := range cs.DSAScores {
						l, _ := strconv.Atoi(ls)
						if len(f.Shape) != 2 || f.Shape[0] != cs.N || f.Shape[1] != cs.N {
							t.Fatalf("layer %d: scores shape %v, want [%d %d]", l, f.Shape, cs.N, cs.N)
						}
						want := fixtures.F32File(t, filepath.Join(refDir, f.File), cs.N*cs.N)
						got := tr.DSAScores[l]
						if len(got) != cs.N {
							t.Fatalf("layer %d: %d traced score rows, want %d", l, len(got), cs.N)
						}
						worst := 0.0
						for p := range cs.N {
							ref := want[p*cs.N : p*cs.N+p+1] // causal keys only
							if len(got[p]) != p+1 {
								t.Fatalf("layer %d row %d: %d scores, want %d", l, p, len(got[p]), p+1)
							}
							scale := 1.0
							for _, v := range ref {
								scale = max(scale, math.Abs(float64(v)))
							}
							d, at := fixtures.MaxAbsDiff(got[p], ref)
							worst = max(worst, d/scale)
							if d > 1e-5*scale {
								t.Errorf("layer %d row %d key %d: score %g, want %g", l, p, at, got[p][at], ref[at])
							}
						}
						t.Logf("layer %d: max relative score diff %.3g", l, worst)
					}
				})
				compared++
			}
			if compared == 0 {
				t.Fatal("no case carries dsa_scores")
			}
		})
	}
}

// TestLatentBatchEqualsPerRow decodes one token of six sequences past
// index_topk together (more rows than the decode batch: one row per
// worker, segments one after another) and alone (the decode batch:
// segments in parallel); the logits must be bit-identical, with the
// default tiles and with small ones (several segments per row).
func TestLatentBatchEqualsPerRow(t *testing.T) {
	m := open(t, "glm52-mini").Model
	refs, _ := fixtures.LoadRefs(t, "glm52-mini")
	prompt := longCase(t, refs).PromptIDs
	ctx := context.Background()
	for _, tiles := range []string{"default", "small"} {
		t.Run(tiles, func(t *testing.T) {
			if tiles == "small" {
				t.Cleanup(model.SetAttentionLayout(m, smallTiles))
			}
			var seqs []*modelSeq
			for n := 110; n <= 135; n += 5 {
				s := &modelSeq{seq: m.NewSequence(0), next: prompt[n]}
				if _, err := m.Forward(ctx, []model.Request{{Seq: s.seq, Tokens: prompt[:n]}}, nil); err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, s)
			}
			alone := make([][]float32, len(seqs))
			reqs := make([]model.Request, len(seqs))
			for i, s := range seqs {
				out, err := m.Forward(ctx, []model.Request{{Seq: s.seq, Tokens: []int{s.next}}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				alone[i] = slices.Clone(out[0].Logits[0])
				s.seq.Trim(s.seq.Len() - 1)
				reqs[i] = model.Request{Seq: s.seq, Tokens: []int{s.next}}
			}
			out, err := m.Forward(ctx, reqs, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range seqs {
				if !slices.Equal(out[i].Logits[0], alone[i]) {
					d, _ := fixtures.MaxAbsDiff(out[i].Logits[0], alone[i])
					t.Errorf("sequence %d: batched decode differs from decoding alone by %.3g", i, d)
				}
			}
		})
	}
}

type modelSeq struct {
	seq  *kvcache.Sequence
	next int
}

// TestThreadsDoNotChangeResults runs the long prompt with one attention
// worker and with three: every logit must be bit-identical.
func TestThreadsDoNotChangeResults(t *testing.T) {
	m := open(t, "glm52-mini").Model
	refs, _ := fixtures.LoadRefs(t, "glm52-mini")
	prompt := longCase(t, refs).PromptIDs
	var results [][][]float32
	for _, threads := range []int{1, 3} {
		restore := model.SetAttentionLayout(m, func(l *plan.AttentionLayout) { smallTiles(l); l.Threads = threads })
		lg, _ := prefill(t, m, prompt, 0)
		restore()
		results = append(results, lg)
	}
	for i := range results[0] {
		if !slices.Equal(results[0][i], results[1][i]) {
			t.Fatalf("row %d: one worker and three give different logits", i)
		}
	}
}

// TestAttentionWorkspaceMatchesPlan requires the workspace the model
// allocates to be exactly the plan's attention line, which a step's rows
// size (the scratch rows, at most the forward's).
func TestAttentionWorkspaceMatchesPlan(t *testing.T) {
	for _, name := range models {
		for _, tc := range []struct{ rows, scratch, context, threads, planned int }{
			{512, 0, 4096, 2, 512}, {64, 0, 8, 1, 64}, {16384, 256, 32768, 16, 256}, {7, 3, 100, 3, 3}, {2048, 0, 32768, 4, model.DefaultScratchRows},
		} {
			t.Run(fmt.Sprintf("%s/%+v", name, tc), func(t *testing.T) {
				d, err := loader.Open(context.Background(), fixtures.ModelDir(t, name), loader.Options{
					Model: model.Options{Limits: model.Limits{Rows: tc.rows, ScratchRows: tc.scratch, Context: tc.context, Workers: tc.threads}},
				})
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				m := d.Model
				it := plan.AttentionWorkspace(m.Config(), plan.AttentionSizing{Rows: tc.planned, Context: tc.context, Threads: tc.threads, DSA: m.HasDSA()})
				if got := m.NewRunner().AttentionWorkspaceBytes(); got != it.Bytes {
					t.Errorf("the model allocated %d bytes, the plan counts %d (%s)", got, it.Bytes, it.Detail)
				}
				if it.Name != plan.ItemAttention || it.Detail == "" {
					t.Errorf("plan item %+v", it)
				}
			})
		}
	}
}
