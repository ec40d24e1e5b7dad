package model_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixturemodel"
	"github.com/spoolhq/spool/internal/fixtures"
)

// Tolerances from ../shared/fixtures/README.md; the demo model has
// glm52-mini's architecture and references made the same way, so its
// tolerance.
var logitTolerance = map[string]float64{"glm52-tiny": 1e-4, "glm52-mini": 1e-3, fixtures.DemoName: 1e-3}

const marginFloor = 1e-3

// open loads a fixture model (or the demo) once per test binary.
func open(t *testing.T, name string) *loader.Dir { return openB(t, name) }

func openB(t testing.TB, name string) *loader.Dir {
	t.Helper()
	return fixturemodel.Shared(t, name)
}

// models are the models whose references every parity test checks: the
// shared fixtures and the committed demo model (its references are
// assets/refs/glm52-demo), so that the model `make run` serves is exact
// on every path.
var models = []string{"glm52-tiny", "glm52-mini", fixtures.DemoName}

func TestParityFullForward(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := open(t, name).Model
			refs, refDir := fixtures.LoadRefs(t, name)
			for ci, cs := range refs.Cases {
				t.Run(cs.Label, func(t *testing.T) { checkFullForward(t, m, name, refDir, cs, ci == 0) })
			}
		})
	}
}

// checkFullForward forwards the case's prompt at once and compares with
// the reference: logits within the tolerance, argmax wherever the margin
// allows, router ids and weights, DSA selections, and with hidden the
// hidden states.
func checkFullForward(t *testing.T, m *model.Model, name, refDir string, cs fixtures.Case, hidden bool) {
	t.Helper()
	V := m.Config().VocabSize
	tr := &model.Trace{}
	out, err := m.Forward(context.Background(), []model.Request{{Seq: m.NewSequence(0), Tokens: cs.PromptIDs, AllLogits: true}}, tr)
	if err != nil {
		t.Fatal(err)
	}
	want := fixtures.F32File(t, filepath.Join(refDir, cs.LogitsFile), cs.N*V)
	diff, at := fixtures.MaxAbsDiff(slices.Concat(out[0].Logits...), want)
	t.Logf("max |logit diff| %.3g at row %d", diff, at/V)
	if diff > logitTolerance[name] {
		t.Errorf("logits differ by %.3g at row %d token %d (tolerance %g)", diff, at/V, at%V, logitTolerance[name])
	}
	for p := range cs.N {
		if fixtures.Margin(cs.Top5[p]) > marginFloor && generate.Argmax(out[0].Logits[p]) != cs.Argmax[p] {
			t.Errorf("row %d: argmax %d, want %d", p, generate.Argmax(out[0].Logits[p]), cs.Argmax[p])
		}
	}
	if len(tr.Routes) == 0 {
		t.Fatal("no routes traced")
	}
	checkRoutes(t, m, cs, tr)
	checkDSA(t, m, cs, tr)
	if hidden && cs.HiddenFile != "" {
		checkHidden(t, refDir, cs, tr)
	}
}

func checkRoutes(t *testing.T, m *model.Model, cs fixtures.Case, tr *model.Trace) {
	t.Helper()
	for ls, want := range cs.Routes {
		l, _ := strconv.Atoi(ls)
		got := tr.Routes[l]
		if len(got) != cs.N {
			t.Errorf("layer %d: %d routed rows, want %d", l, len(got), cs.N)
			continue
		}
		for p := range cs.N {
			ids := slices.Clone(got[p])
			ws := map[int]float32{}
			for j, e := range got[p] {
				ws[e] = tr.RouteWeights[l][p][j]
			}
			slices.Sort(ids)
			if !slices.Equal(ids, want.IDs[p]) {
				t.Errorf("layer %d row %d: experts %v, want %v", l, p, ids, want.IDs[p])
				continue
			}
			for j, e := range want.IDs[p] {
				if d := math.Abs(float64(ws[e]) - want.Weights[p][j]); d > 1e-4 {
					t.Errorf("layer %d row %d expert %d: weight %g, want %g", l, p, e, ws[e], want.Weights[p][j])
				}
			}
		}
	}
}

func checkDSA(t *testing.T, m *model.Model, cs fixtures.Case, tr *model.Trace) {
	t.Helper()
	K := m.Config().IndexTopK
	if !m.HasDSA() {
		t.Fatal("fixture model should have DSA indexer weights")
	}
	for ls, rows := range cs.DSA {
		l, _ := strconv.Atoi(ls)
		sel := tr.DSA[l]
		for p, want := range rows {
			var causal []int
			for _, s := range want {
				if s <= p {
					causal = append(causal, s)
				}
			}
			slices.Sort(causal)
			if p+1 <= K {
				if sel != nil && sel[p] != nil {
					t.Errorf("layer %d row %d: selection with only %d keys", l, p, p+1)
				}
				if len(causal) != p+1 {
					t.Errorf("layer %d row %d: reference selects %d of %d dense keys", l, p, len(causal), p+1)
				}
				continue
			}
			if sel == nil || !slices.Equal(sel[p], causal) {
				var got []int
				if sel != nil {
					got = sel[p]
				}
				t.Errorf("layer %d row %d: DSA selection differs (%d vs %d keys)\n got %v\nwant %v", l, p, len(got), len(causal), got, causal)
			}
		}
	}
}

func checkHidden(t *testing.T, refDir string, cs fixtures.Case, tr *model.Trace) {
	t.Helper()
	L, n, H := cs.HiddenShape[0], cs.HiddenShape[1], cs.HiddenShape[2]
	want := fixtures.F32File(t, filepath.Join(refDir, cs.HiddenFile), L*n*H)
	if len(tr.Hidden) != L {
		t.Fatalf("trace has %d hidden layers, want %d", len(tr.Hidden), L)
	}
	for l := range L {
		got := slices.Concat(tr.Hidden[l]...)
		ref := want[l*n*H : (l+1)*n*H]
		diff, _ := fixtures.MaxAbsDiff(got, ref)
		scale := 0.0
		for _, v := range ref {
			scale = max(scale, math.Abs(float64(v)))
		}
		if diff > 1e-4*max(1, scale) {
			t.Errorf("hidden state %d differs by %.3g (max |h| %.3g)", l, diff, scale)
		}
	}
}

func TestParityMTP(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := open(t, name).Model
			if !m.HasMTP() {
				t.Fatal("fixture model should have an MTP layer")
			}
			refs, _ := fixtures.LoadRefs(t, name)
			for _, cs := range refs.Cases {
				t.Run(cs.Label, func(t *testing.T) { checkMTP(t, m, cs, logitTolerance[name]) })
			}
		})
	}
}

// checkMTP prefills the case's prompt, runs the MTP layer over every row
// and compares its predictions with the reference's.
func checkMTP(t *testing.T, m *model.Model, cs fixtures.Case, tol float64) {
	t.Helper()
	seq := m.NewSequence(0)
	out, err := m.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: cs.PromptIDs}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	logits, _, err := m.MTPForward(context.Background(), model.MTPRequest{Seq: seq, Hidden: out[0].Hidden[:cs.N-1], Next: cs.PromptIDs[1:]})
	if err != nil {
		t.Fatal(err)
	}
	checked, mismatches := 0, 0
	for i, lg := range logits {
		if fixtures.Margin(cs.MTPTop5[i]) <= marginFloor {
			continue
		}
		checked++
		if got := generate.Argmax(lg); got != cs.MTPArgmax[i] {
			mismatches++
			t.Errorf("MTP row %d: argmax %d, want %d", i, got, cs.MTPArgmax[i])
		}
		if d := math.Abs(float64(lg[int(cs.MTPTop5[i][0][0])]) - cs.MTPTop5[i][0][1]); d > tol {
			t.Errorf("MTP row %d: top logit differs by %.3g", i, d)
		}
	}
	t.Logf("MTP argmax checked on %d rows, %d mismatches", checked, mismatches)
}

// TestParityGreedy generates with the plain decode loop (prefill, then one
// cached token at a time) and compares with the reference's full-recompute
// greedy tokens wherever the margin allows.
func TestParityGreedy(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := open(t, name).Model
			refs, _ := fixtures.LoadRefs(t, name)
			for _, cs := range refs.Cases {
				t.Run(cs.Label, func(t *testing.T) { checkGreedy(t, m, cs) })
			}
		})
	}
}

// checkGreedy generates the case's greedy continuation and compares it
// with the reference's wherever the margin allows.
func checkGreedy(t *testing.T, m *model.Model, cs fixtures.Case) {
	t.Helper()
	res, err := generate.Generate(context.Background(), m, m.NewSequence(0), cs.PromptIDs, generate.Params{MaxTokens: len(cs.Greedy)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for i, want := range cs.Greedy {
		if res.Tokens[i] != want {
			if cs.GreedyMargins[i] > marginFloor {
				t.Errorf("greedy token %d: %d, want %d (margin %.3g)", i, res.Tokens[i], want, cs.GreedyMargins[i])
			}
			break // the continuations diverge from here
		}
		compared++
	}
	t.Logf("%d of %d greedy tokens equal", compared, len(cs.Greedy))
}

// TestCachedDecodeMatchesFullForward feeds the long prompt one token at a
// time (and in uneven chunks) and compares every row's logits with the
// reference.
func TestCachedDecodeMatchesFullForward(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := open(t, name).Model
			refs, refDir := fixtures.LoadRefs(t, name)
			cs := refs.Cases[len(refs.Cases)-1]
			V := m.Config().VocabSize
			want := fixtures.F32File(t, filepath.Join(refDir, cs.LogitsFile), cs.N*V)
			for _, chunk := range []int{1, 7} {
				t.Run(fmt.Sprintf("chunk%d", chunk), func(t *testing.T) {
					seq := m.NewSequence(0)
					worst := 0.0
					for i := 0; i < cs.N; i += chunk {
						toks := cs.PromptIDs[i:min(i+chunk, cs.N)]
						out, err := m.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: toks, AllLogits: true}}, nil)
						if err != nil {
							t.Fatal(err)
						}
						for j, lg := range out[0].Logits {
							d, _ := fixtures.MaxAbsDiff(lg, want[(i+j)*V:(i+j+1)*V])
							worst = max(worst, d)
						}
					}
					t.Logf("max |logit diff| %.3g", worst)
					if worst > logitTolerance[name] {
						t.Errorf("cached decode logits differ by %.3g (tolerance %g)", worst, logitTolerance[name])
					}
				})
			}
		})
	}
}

// TestBatchedRowsEqualSingle checks that rows of several sequences in one
// forward give bit-identical logits to separate forwards.
func TestBatchedRowsEqualSingle(t *testing.T) {
	m := open(t, "glm52-mini").Model
	refs, _ := fixtures.LoadRefs(t, "glm52-mini")
	a, b := refs.Cases[0].PromptIDs, refs.Cases[1].PromptIDs
	ctx := context.Background()
	single := func(p []int, next int) []float32 {
		seq := m.NewSequence(0)
		if _, err := m.Forward(ctx, []model.Request{{Seq: seq, Tokens: p}}, nil); err != nil {
			t.Fatal(err)
		}
		out, err := m.Forward(ctx, []model.Request{{Seq: seq, Tokens: []int{next}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(out[0].Logits[0]) // outputs are valid until the next forward
	}
	sa, sb := m.NewSequence(0), m.NewSequence(0)
	if _, err := m.Forward(ctx, []model.Request{{Seq: sa, Tokens: a}, {Seq: sb, Tokens: b}}, nil); err != nil {
		t.Fatal(err)
	}
	out, err := m.Forward(ctx, []model.Request{{Seq: sa, Tokens: []int{17}}, {Seq: sb, Tokens: []int{42}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ba, bb := slices.Clone(out[0].Logits[0]), slices.Clone(out[1].Logits[0])
	if !slices.Equal(ba, single(a, 17)) || !slices.Equal(bb, single(b, 42)) {
		t.Error("batched decode rows differ from single-sequence decode")
	}
}
