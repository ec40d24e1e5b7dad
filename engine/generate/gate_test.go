package generate_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixturemodel"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestGateSwitchesMidAnswer drives a decoder of the trained demo model
// whose gate runs on a clock the test moves by counts: a forward takes 4
// ms whatever its rows (in memory, a decode forward costs its weights'
// bytes once) and the MTP layer's forward 1 ms. A seam makes every draft
// miss for a stretch mid-answer. The gate must draft before the stretch
// (the demo's drafts are mostly accepted: 5 ms for about two tokens beats
// 4 ms for one), turn drafting off within it and back on after it, and
// the tokens must be those of a plain decode.
func TestGateSwitchesMidAnswer(t *testing.T) {
	dir := fixturemodel.Shared(t, fixtures.DemoName)
	m := dir.Model
	refs, _ := fixtures.LoadRefs(t, fixtures.DemoName)
	prompt := refs.Cases[0].PromptIDs
	noEOS := map[int]float64{}
	for _, id := range m.Config().EOSTokenIDs {
		noEOS[id] = -100
	}
	const tokens, missFrom, missTo = 240, 80, 150
	ctx := context.Background()
	plain, err := generate.Generate(ctx, m, m.NewSequence(0), prompt, generate.Params{MaxTokens: tokens, LogitBias: noEOS}, nil)
	if err != nil {
		t.Fatal(err)
	}

	now := time.Unix(0, 0)
	gate := draftgate.New(draftgate.Config{Clock: func() time.Time { return now }})
	r := m.NewRunner()
	d, err := generate.NewDecoder(r, m.NewSequence(0), prompt, generate.Params{MaxTokens: tokens, LogitBias: noEOS, Speculative: true, Gate: gate}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vocab := m.Config().VocabSize
	generate.SetDraftSeam(d, func(draft int) int {
		if n := len(d.Result().Tokens); n >= missFrom && n < missTo {
			return (draft + 1) % vocab // a token the model did not predict
		}
		return draft
	})
	// choices[i] is the gate's choice once i tokens are out.
	choices := map[int]string{}
	for !d.Done() {
		proposed := d.Result().DraftsProposed
		req, err := d.Next(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if d.Result().DraftsProposed > proposed {
			now = now.Add(time.Millisecond) // the MTP layer's forward
		}
		outs, cost, err := generate.Forward(ctx, r, []model.Request{req})
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(4 * time.Millisecond)
		if err := d.Consume(ctx, outs[0], cost); err != nil {
			t.Fatal(err)
		}
		choices[len(d.Result().Tokens)] = gate.Choice()
	}
	d.Finish(ctx)
	res := d.Result()
	if !slices.Equal(res.Tokens, plain.Tokens) {
		t.Fatalf("gated tokens differ from plain ones:\n%v\n%v", res.Tokens, plain.Tokens)
	}
	// first returns the first token count in [from, to) at which the
	// choice was want, or -1.
	first := func(want string, from, to int) int {
		for i := from; i < to; i++ {
			if choices[i] == want {
				return i
			}
		}
		return -1
	}
	before, off, on := first("draft", 0, missFrom), first("plain", missFrom, missTo), first("draft", missTo, tokens)
	t.Logf("drafting chosen at %d, off at %d, on again at %d; %d of %d drafts accepted; %+v", before, off, on, res.DraftsAccepted, res.DraftsProposed, *res.Drafting)
	if before < 0 || off < 0 || on < 0 {
		t.Errorf("the gate did not draft before the misses (%d), stop within them (%d) and draft again after (%d)", before, off, on)
	}
	if res.Drafting == nil || res.Drafting.Switches < 2 || res.Drafting.Choice != "draft" {
		t.Errorf("drafting report %+v, want two switches or more and drafting at the end", res.Drafting)
	}
}
