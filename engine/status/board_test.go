package status

import (
	"context"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/clock"
)

// TestBoardFollowsARequest: a request's phases, its rate on the board's
// clock, its summary, and a signal to subscribers at each change.
func TestBoardFollowsARequest(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := NewBoard(clk)
	b.Serve("m", nil)
	changed, stop := b.Subscribe()
	defer stop()
	drain := func() bool {
		select {
		case <-changed:
			return true
		default:
			return false
		}
	}
	drain()
	b.Begin("r", 100)
	if st := b.Status(); st.State != Queued || st.Queued != 1 || !drain() {
		t.Fatalf("queued: %+v", st)
	}
	ev, started := b.Prefill("r", scheduler.Progress{PromptTokens: 100, CachedTokens: 20, Done: 40})
	if ev == nil || !started || b.Status().State != Prefilling || !drain() {
		t.Fatalf("prefilling: %+v %v %+v", ev, started, b.Status())
	}
	clk.Advance(10 * time.Millisecond)
	if ev, started := b.Prefill("r", scheduler.Progress{PromptTokens: 100, CachedTokens: 20, Done: 60}); ev != nil || started {
		t.Errorf("a prefill event 10 ms after the last: %+v", ev)
	}
	clk.Advance(990 * time.Millisecond)
	if !b.Tokens("r", 1) || b.Tokens("r", 4) {
		t.Error("the first tokens are not told apart from the next")
	}
	clk.Advance(2 * time.Second)
	st := b.Status()
	if st.State != Generating || st.Active != 1 || st.TokensPerSecond != 2 || st.Requests[0].PrefillDone != 100 {
		t.Fatalf("generating: %+v", st)
	}
	sum := b.End("r", nil, "cancelled")
	if sum == nil || sum.CompletionTokens != 5 || sum.PrefillMS != 1000 || sum.DecodeMS != 2000 || sum.DecodeTokensPerSecond != 2 || sum.PrefillTokensPerSecond != 80 {
		t.Fatalf("summary %+v", sum)
	}
	if b.End("r", nil, "stop") != nil {
		t.Error("a request ended twice")
	}
	if st := b.Status(); st.State != Ready || st.Last == nil || st.Last.Finish != "cancelled" || len(st.Requests) != 0 || st.Model != "m" {
		t.Errorf("after: %+v", st)
	}
}

// TestBoardPhase: the engine's one phase is its lifecycle until it is
// ready, then its requests'; Wait answers once the board has changed.
func TestBoardPhase(t *testing.T) {
	b := NewBoard(nil)
	if b.Phase() != Stopped {
		t.Fatal(b.Phase())
	}
	v := b.Version()
	b.SetEngine(Engine{Phase: Loading, Detail: "loading weights", Progress: 0.2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if got := b.Wait(ctx, v); got == v || b.Phase() != Loading {
		t.Fatalf("Wait after a change: %d (was %d), phase %s", got, v, b.Phase())
	}
	b.SetEngine(Engine{Phase: Ready})
	b.Begin("x", 3)
	if b.Phase() != Queued {
		t.Errorf("ready with a queued request: %s", b.Phase())
	}
	v = b.Version()
	cancel()
	if got := b.Wait(ctx, v); got != v {
		t.Errorf("Wait with an ended context moved to %d", got)
	}
}

func TestRemotePhase(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		st   remote.Status
		want Phase
	}{
		{remote.Status{}, Connecting},
		{remote.Status{CheckedAt: &now}, Unreachable},
		{remote.Status{CheckedAt: &now, Reachable: true}, Ready},
		{remote.Status{CheckedAt: &now, Reachable: true, Active: 1}, Generating},
	} {
		if got := RemotePhase(tc.st); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.st, got, tc.want)
		}
	}
}
