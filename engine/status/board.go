package status

import (
	"context"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/clock"
	"github.com/spoolhq/spool/internal/notify"
)

// prefillEventInterval is the least time between two prefill events of one
// request (its first and last always go out).
const prefillEventInterval = 100 * time.Millisecond

// Board owns the engine's status: its lifecycle (the app's host sets it),
// the requests in flight and the last that ended (the server's requests
// report to it), or the remote engine the server forwards to. Everything
// that shows the status — the UI's events, /stats, the menu bar, the
// shell's page — reads it here, and Subscribe tells them when it changes.
// Its methods are safe for concurrent use; none calls out while holding
// its lock.
type Board struct {
	clock   clock.Clock
	changes notify.Notifier

	mu      sync.Mutex
	version uint64 // counts the changes
	engine  Engine
	model   string
	remote  *remote.Client
	reqs    map[string]*live
	order   []string // by start
	last    *RequestSummary
}

type live struct {
	status      RequestStatus
	started     time.Time
	firstAt     time.Time
	lastPrefill time.Time
}

// NewBoard returns a board of a stopped engine, timing requests on c (nil:
// the system clock).
func NewBoard(c clock.Clock) *Board {
	return &Board{clock: clock.Or(c), engine: Engine{Phase: Stopped}, reqs: map[string]*live{}}
}

// changed counts a change and signals the subscribers.
func (b *Board) changed() {
	b.mu.Lock()
	b.version++
	b.mu.Unlock()
	b.changes.Notify()
}

// Version counts the changes so far.
func (b *Board) Version() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.version
}

// Wait waits until the board has changed since version (at once when it
// has) or ctx ends, and returns the version then: a long poll, for a
// client that cannot hold a stream open.
func (b *Board) Wait(ctx context.Context, version uint64) uint64 {
	changed, stop := b.Subscribe()
	defer stop()
	for {
		if v := b.Version(); v != version {
			return v
		}
		select {
		case <-ctx.Done():
			return b.Version()
		case <-changed:
		}
	}
}

// Subscribe signals the returned channel after each change; stop ends the
// subscription.
func (b *Board) Subscribe() (changed <-chan struct{}, stop func()) { return b.changes.Subscribe() }

// Watched reports whether anyone subscribes.
func (b *Board) Watched() bool { return b.changes.Active() }

// SetEngine records the engine's lifecycle.
func (b *Board) SetEngine(e Engine) {
	b.mu.Lock()
	b.engine = e
	b.mu.Unlock()
	b.changed()
}

// Engine is the engine's lifecycle.
func (b *Board) Engine() Engine {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.engine
}

// Serve records what the server serves: the local engine's model, or
// (rc set) the remote engine it forwards to, whose own status the board
// then reports.
func (b *Board) Serve(model string, rc *remote.Client) {
	b.mu.Lock()
	b.model, b.remote = model, rc
	b.mu.Unlock()
	b.changed()
}

// Changed records a change made elsewhere (the remote engine's status, the
// host's running state) and signals the subscribers.
func (b *Board) Changed() { b.changed() }

// Begin registers a request of prompt tokens, queued.
func (b *Board) Begin(id string, prompt int) {
	b.mu.Lock()
	b.reqs[id] = &live{status: RequestStatus{ID: id, Phase: Queued, PromptTokens: prompt}, started: b.clock.Now()}
	b.order = append(b.order, id)
	b.mu.Unlock()
	b.changed()
}

// Prefill records a request's prompt progress; it returns the event to
// publish (nil between two within prefillEventInterval, but for the first
// and the last), and whether the request's phase changed (its prefill
// started).
func (b *Board) Prefill(id string, p scheduler.Progress) (ev *PrefillEvent, started bool) {
	b.mu.Lock()
	r := b.reqs[id]
	if r == nil {
		b.mu.Unlock()
		return nil, false
	}
	first := r.status.Phase == Queued
	r.status.Phase = Prefilling
	r.status.PromptTokens, r.status.CachedTokens, r.status.PrefillDone = p.PromptTokens, p.CachedTokens, p.Done
	now := b.clock.Now()
	send := first || p.Done >= p.PromptTokens || now.Sub(r.lastPrefill) >= prefillEventInterval
	if send {
		r.lastPrefill = now
	}
	b.mu.Unlock()
	if first {
		b.changed()
	}
	if send {
		ev = &PrefillEvent{ID: id, PromptTokens: p.PromptTokens, CachedTokens: p.CachedTokens, Done: p.Done}
	}
	return ev, first
}

// Tokens counts n more tokens of a request; it reports whether they are
// its first (it is generating now).
func (b *Board) Tokens(id string, n int) (first bool) {
	if n <= 0 {
		return false
	}
	b.mu.Lock()
	if r := b.reqs[id]; r != nil {
		if r.firstAt.IsZero() {
			r.firstAt, first = b.clock.Now(), true
			r.status.Phase = Generating
			r.status.PrefillDone = r.status.PromptTokens
		}
		r.status.CompletionTokens += n
	}
	b.mu.Unlock()
	b.changed()
	return first
}

// End finishes a request once, taking the engine's figures from res when
// there is one; it returns the request's summary (nil when it had ended).
func (b *Board) End(id string, res *scheduler.Result, finish string) *RequestSummary {
	b.mu.Lock()
	r := b.reqs[id]
	if r == nil {
		b.mu.Unlock()
		return nil
	}
	delete(b.reqs, id)
	for i, o := range b.order {
		if o == id {
			b.order = append(b.order[:i], b.order[i+1:]...)
			break
		}
	}
	sum := r.summary(res, finish, b.clock.Now())
	b.last = &sum
	b.mu.Unlock()
	b.changed()
	return &sum
}

// summary is the request's figures: the scheduler's when it finished the
// request, else (cancelled mid-way) the board's own timing.
func (r *live) summary(res *scheduler.Result, finish string, now time.Time) RequestSummary {
	st := r.status
	sum := RequestSummary{ID: st.ID, Finish: finish, PromptTokens: st.PromptTokens, CachedTokens: st.CachedTokens, CompletionTokens: st.CompletionTokens}
	var prefill, decode time.Duration
	if res != nil {
		sum.PromptTokens, sum.CachedTokens = res.PromptTokens, res.CachedTokens
		prefill, decode = res.PrefillTime, res.DecodeTime
	} else if !r.firstAt.IsZero() {
		prefill, decode = r.firstAt.Sub(r.started), now.Sub(r.firstAt)
	} else {
		prefill = now.Sub(r.started)
	}
	// The rates come from the rounded times that usage reports, so that a
	// client computing them from usage gets the same figures.
	sum.PrefillMS, sum.DecodeMS = ms(prefill), ms(decode)
	sum.DecodeTokensPerSecond = decodeRate(sum.CompletionTokens, msDuration(sum.DecodeMS))
	if read := res != nil || !r.firstAt.IsZero(); read {
		sum.PrefillTokensPerSecond = prefillRate(sum.PromptTokens-sum.CachedTokens, msDuration(sum.PrefillMS))
	}
	return sum
}

// Status is where the serving engine stands: its requests in flight and
// the last that ended, or the remote engine's state.
func (b *Board) Status() Status {
	b.mu.Lock()
	rc := b.remote
	b.mu.Unlock()
	if rc != nil {
		return remoteStatus(rc.Status())
	}
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := Status{State: Ready, Model: b.model, Requests: []RequestStatus{}}
	for _, id := range b.order {
		r := b.reqs[id]
		rs := r.status
		if !r.firstAt.IsZero() {
			rs.TokensPerSecond = decodeRate(rs.CompletionTokens, now.Sub(r.firstAt))
			out.TokensPerSecond += rs.TokensPerSecond
		}
		if rs.Phase.rank() > out.State.rank() {
			out.State = rs.Phase
		}
		if rs.Phase == Queued {
			out.Queued++
		} else {
			out.Active++
		}
		out.Requests = append(out.Requests, rs)
	}
	if b.last != nil {
		last := *b.last
		out.Last = &last
	}
	return out
}

// Phase is the engine's one phase: its lifecycle while it is not ready,
// else the serving phase (Status's state).
func (b *Board) Phase() Phase {
	if e := b.Engine(); e.Phase != Ready {
		return e.Phase
	}
	return b.Status().State
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// decodeRate is tokens after the first over the time since the first.
func decodeRate(tokens int, d time.Duration) float64 {
	if tokens < 2 || d <= 0 {
		return 0
	}
	return float64(tokens-1) / d.Seconds()
}

// prefillRate is the prompt tokens read over the prefill time.
func prefillRate(tokens int, d time.Duration) float64 {
	if tokens <= 0 || d <= 0 {
		return 0
	}
	return float64(tokens) / d.Seconds()
}
