package model_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestLayerMajorParity forwards every reference case of the fixtures and
// the demo through layers whose steps take 1 and 5 rows at a time (the
// routed experts applied to all the rows of the forward at once, in
// ascending order, attention of each step over the keys earlier steps
// wrote) and compares with the references as the one-step forward is:
// logits, argmax, routes, DSA selections, and the MTP layer's predictions
// over the whole prompt.
func TestLayerMajorParity(t *testing.T) {
	for _, name := range models {
		refs, refDir := fixtures.LoadRefs(t, name)
		for _, scratch := range []int{1, 5} {
			t.Run(fmt.Sprintf("%s/scratch%d", name, scratch), func(t *testing.T) {
				m := plannedModel(t, name, model.Limits{ScratchRows: scratch})
				for _, cs := range refs.Cases {
					t.Run(cs.Label, func(t *testing.T) {
						checkFullForward(t, m, name, refDir, cs, false)
						checkMTP(t, m, cs, logitTolerance[name])
					})
				}
			})
		}
	}
}

// TestMoEArrivalEqualsAscending: applying a forward's routed experts as
// they arrive (with per-slot outputs summed at the end) and in ascending
// order (into running sums) makes the same additions in the same order:
// the logits are bit-identical.
func TestMoEArrivalEqualsAscending(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := open(t, name).Model
			refs, _ := fixtures.LoadRefs(t, name)
			compared := 0
			for _, cs := range refs.Cases {
				if cs.N > model.ArrivalRows {
					continue
				}
				logits := func(arrival int) []float32 {
					r := m.NewRunner()
					model.SetArrivalRows(r, arrival)
					out, err := r.Forward(context.Background(), []model.Request{{Seq: m.NewSequence(0), Tokens: cs.PromptIDs, AllLogits: true}}, nil)
					if err != nil {
						t.Fatal(err)
					}
					return slices.Concat(out[0].Logits...)
				}
				if !slices.Equal(logits(model.ArrivalRows), logits(0)) {
					t.Errorf("case %s: the two ways of applying experts give different logits", cs.Label)
				}
				compared++
			}
			if compared == 0 {
				t.Fatalf("no reference case of at most %d tokens", model.ArrivalRows)
			}
		})
	}
}
