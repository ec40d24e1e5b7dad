package generate_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixturemodel"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestGateSwitchesMidAnswer drives a decoder of the trained demo model
// through a seam that makes every draft miss for a stretch mid-answer. The
// gate must draft before the stretch (the demo's drafts are mostly
// accepted), turn drafting off within it and back on after it, and the
// tokens must be those of a plain decode. Its decisions come from counts,
// in two ways:
//   - in memory (no expert reads), on a clock the test moves by forwards:
//     a forward takes 4 ms whatever its rows (a decode forward costs its
//     weights' bytes once) and the MTP layer's forward 1 ms, so 5 ms for
//     about two tokens beats 4 ms for one;
//   - with the experts streamed through a cache of 2 MiB on a frozen
//     clock: the expert bytes the runner records decide alone. Drafting
//     must stop within the misses (a missed draft reads two positions'
//     experts and the MTP layer's for one token); whether it then pays
//     again depends on how often the two positions' experts are cached,
//     which the bytes decide, not the test.
func TestGateSwitchesMidAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		streamed bool
	}{{"in memory, a clock moved by forwards", false}, {"streamed, bytes alone", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var m *model.Model
			if tc.streamed {
				d, err := loader.Open(context.Background(), fixtures.DemoModel(), loader.Options{Experts: host.StreamedWith(experts.StreamOptions{CacheBytes: 2 << 20})})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				m = d.Model
			} else {
				m = fixturemodel.Shared(t, fixtures.DemoName).Model
			}
			checkGateSwitches(t, m, !tc.streamed)
		})
	}
}

func checkGateSwitches(t *testing.T, m *model.Model, clocked bool) {
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
		if clocked && d.Result().DraftsProposed > proposed {
			now = now.Add(time.Millisecond) // the MTP layer's forward
		}
		outs, cost, err := generate.Forward(ctx, r, []model.Request{req})
		if err != nil {
			t.Fatal(err)
		}
		if clocked {
			now = now.Add(4 * time.Millisecond)
		}
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
	if off < 0 || choices[missTo-1] != "plain" {
		t.Errorf("the gate drafted through the misses (off at %d, %q at their end)", off, choices[missTo-1])
	}
	if !clocked {
		if d := res.Drafting; d.Draft.Bytes == 0 || d.Plain.Bytes == 0 || d.Draft.Seconds != 0 {
			t.Errorf("drafting report %+v, want both modes' bytes measured on a frozen clock", d)
		}
		return
	}
	if before < 0 || on < 0 {
		t.Errorf("the gate did not draft before the misses (%d) and again after them (%d)", before, on)
	}
	if res.Drafting == nil || res.Drafting.Switches < 2 || res.Drafting.Choice != "draft" {
		t.Errorf("drafting report %+v, want two switches or more and drafting at the end", res.Drafting)
	}
}
