package scheduler_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/scheduler"
)

// TestBatchedNeverDrafts: speculative requests that share every decode
// forward (admitted together, their lengths staggered so that they end
// together) draft nothing and measure nothing for their gates, and their
// tokens are those of a plain decode.
func TestBatchedNeverDrafts(t *testing.T) {
	m := openMini(t)
	noEOS := map[int]float64{}
	for _, id := range m.Config().EOSTokenIDs {
		noEOS[id] = -100
	}
	const n, tokens = 3, 12
	s := scheduler.New(m, scheduler.Config{MaxBatch: n, IdleSequences: -1})
	var streams []*scheduler.Stream
	var want [][]int
	for i, prompt := range prompts(t)[:n] {
		// Request i's prompt is forwarded in step i+1 and its decode rows
		// from step i+2 on: fewer tokens for the later ones end them all
		// in the same step.
		p := generate.Params{MaxTokens: tokens - i, LogitBias: noEOS}
		plain, err := generate.Generate(context.Background(), m, m.NewSequence(0), prompt, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, plain.Tokens)
		p.Speculative = true
		st, err := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	for i, st := range streams {
		toks, res := collect(t, st)
		if !slices.Equal(ids(toks), want[i]) {
			t.Errorf("request %d: %v, plain %v", i, ids(toks), want[i])
		}
		if res.Lane != scheduler.LaneBatched || res.DraftsProposed != 0 {
			t.Errorf("request %d: lane %s, %d drafts; want batched with none", i, res.Lane, res.DraftsProposed)
		}
		if d := res.Drafting; d == nil || d.Draft.Steps != 0 || d.Plain.Steps != 0 {
			t.Errorf("request %d: drafting report %+v, want no lone step measured", i, d)
		}
	}
}

// TestGatePerSequence: a conversation's next turn keeps its sequence's
// gate (what it measured, what it chose), a new conversation's sequence
// gets a gate of its own, and Stats sums what the lone steps cost. The
// gates run on a frozen clock over a model in memory: nothing tells the
// modes apart, so each gate, once it has explored, chooses plain steps.
func TestGatePerSequence(t *testing.T) {
	m := openMini(t)
	noEOS := map[int]float64{}
	for _, id := range m.Config().EOSTokenIDs {
		noEOS[id] = -100
	}
	frozen := time.Unix(0, 0)
	s := start(t, m, scheduler.Config{Drafting: draftgate.Config{Clock: func() time.Time { return frozen }}})
	ask := func(prompt []int, tokens int) ([]int, *scheduler.Result) {
		st, err := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: tokens, LogitBias: noEOS, Speculative: true}})
		if err != nil {
			t.Fatal(err)
		}
		toks, res := collect(t, st)
		return ids(toks), res
	}
	ps := prompts(t)
	first, r1 := ask(ps[0], 20)
	if d := r1.Drafting; d == nil || d.Choice != "plain" || d.Draft.Steps == 0 || d.Plain.Steps == 0 {
		t.Fatalf("first turn: drafting %+v, want both modes explored and plain chosen", d)
	}
	_, r2 := ask(slices.Concat(ps[0], first, []int{39, 40}), 10)
	if d := r2.Drafting; d == nil || d.Choice != "plain" || d.Draft.Steps != 0 || d.Plain.Steps == 0 {
		t.Errorf("second turn: drafting %+v, want the first turn's choice kept: plain steps only", d)
	}
	_, r3 := ask(ps[1], 10)
	if d := r3.Drafting; d == nil || d.Draft.Steps == 0 {
		t.Errorf("another conversation: drafting %+v, want a gate of its own that explores", d)
	}
	st := s.Stats()
	total := func(r *scheduler.Result) int { return r.Drafting.Draft.Steps + r.Drafting.Plain.Steps }
	if d := st.Drafting; d == nil || d.Draft.Steps+d.Plain.Steps != total(r1)+total(r2)+total(r3) {
		t.Errorf("stats drafting %+v, want the three requests' lone steps", d)
	}
}
