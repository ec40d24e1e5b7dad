package server

import (
	"context"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/turn"
)

// What the UI and the menu bar are told about the requests in flight. The
// server, not the scheduler's rate window, is the source: it knows the
// moment a request ends, and each reply's figures come from that request's
// own counts, so the sidebar, the tray and the chat show one number.
//
// Events on the websocket:
//
//	{"type":"prefill","data":{"id":…,"prompt_tokens":…,"cached_tokens":…,"done":…}}
//	{"type":"request","data":<RequestSummary>}   (a request ended)
//	{"type":"state","data":<Status>}              (at once on every start and end)

// Request phases, as Status.State and RequestStatus.Phase report them.
const (
	PhaseQueued     = "queued"     // waiting for a sequence
	PhasePrefilling = "prefilling" // reading the prompt
	PhaseGenerating = "generating" // producing tokens
	// StateReady is Status.State with no request in flight.
	StateReady = "ready"
)

// prefillEventInterval is the least time between two prefill events of one
// request (its first and last always go out).
const prefillEventInterval = 100 * time.Millisecond

// PrefillEvent is a request's prompt-reading progress.
type PrefillEvent struct {
	ID           string `json:"id"`
	PromptTokens int    `json:"prompt_tokens"`
	CachedTokens int    `json:"cached_tokens"`
	Done         int    `json:"done"`
}

// RequestStatus is one request in flight.
type RequestStatus struct {
	ID           string `json:"id"`
	Phase        string `json:"phase"`
	PromptTokens int    `json:"prompt_tokens"`
	CachedTokens int    `json:"cached_tokens"`
	// PrefillDone counts prompt tokens read (cached ones included).
	PrefillDone      int `json:"prefill_done"`
	CompletionTokens int `json:"completion_tokens"`
	// TokensPerSecond is the request's decode rate so far: its tokens
	// after the first over the time since the first.
	TokensPerSecond float64 `json:"tokens_per_second"`
}

// RequestSummary describes a request that ended, from its own counts: the
// figures its usage reports.
type RequestSummary struct {
	ID string `json:"id"`
	// Finish is stop, length, tool_calls, cancelled or error.
	Finish           string  `json:"finish"`
	PromptTokens     int     `json:"prompt_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	PrefillMS        float64 `json:"prefill_ms"`
	DecodeMS         float64 `json:"decode_ms"`
	// PrefillTokensPerSecond counts the prompt tokens read (not cached);
	// DecodeTokensPerSecond the tokens after the first over the time since
	// the first (the first token's time is the prefill's).
	PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second"`
	DecodeTokensPerSecond  float64 `json:"decode_tokens_per_second"`
}

// Status is where the server stands: ready, or the phase of its busiest
// request.
type Status struct {
	// State is ready, queued, prefilling or generating.
	State string `json:"state"`
	// TokensPerSecond sums the decode rates of the requests generating.
	TokensPerSecond float64 `json:"tokens_per_second"`
	// Active counts requests holding a sequence, Queued those waiting.
	Active   int             `json:"active"`
	Queued   int             `json:"queued"`
	Model    string          `json:"model"`
	Requests []RequestStatus `json:"requests"`
	// Last is the most recent request that ended.
	Last *RequestSummary `json:"last,omitempty"`
	// Engine is "remote" while the server forwards to a remote engine
	// (Remote says how it is doing); empty for the local engine.
	Engine string         `json:"engine,omitempty"`
	Remote *RemoteSummary `json:"remote,omitempty"`
}

// liveRequests tracks the requests in flight. Its methods are safe for
// concurrent use (OnPrefill calls come from the scheduler's goroutine).
type liveRequests struct {
	mu    sync.Mutex
	reqs  map[string]*liveRequest
	order []string // by start
	last  *RequestSummary
}

type liveRequest struct {
	status      RequestStatus
	started     time.Time
	firstAt     time.Time
	lastPrefill time.Time
}

func newLiveRequests() *liveRequests { return &liveRequests{reqs: map[string]*liveRequest{}} }

// observer is the server as the local engine's Observer: the live status
// and the UI's events follow the engine's turns.
type observer struct{ s *Server }

func (o observer) Begin(ctx context.Context, id string, prompt int) {
	o.s.beginRequest(ctx, id, prompt)
}
func (o observer) Prefill(id string, p scheduler.Progress) { o.s.onPrefill(id, p) }
func (o observer) Tokens(id string, n int)                 { o.s.addTokens(id, n) }
func (o observer) End(id string, res *scheduler.Result, finish string) {
	o.s.endRequest(id, res, finish)
}

func (o observer) Output(id, reasoning, text string) {
	if o.s.hub.active() {
		o.s.hub.publish(Event{Type: "token", Data: map[string]string{"id": id, "content": text, "reasoning": reasoning}})
	}
}

// beginRequest registers a request; it ends when ctx does if nothing ends
// it first.
func (s *Server) beginRequest(ctx context.Context, id string, prompt int) {
	s.hub.live.mu.Lock()
	s.hub.live.reqs[id] = &liveRequest{
		status:  RequestStatus{ID: id, Phase: PhaseQueued, PromptTokens: prompt},
		started: time.Now(),
	}
	s.hub.live.order = append(s.hub.live.order, id)
	s.hub.live.mu.Unlock()
	context.AfterFunc(ctx, func() { s.endRequest(id, nil, scheduler.FinishCancelled) })
	s.publishState()
}

// onPrefill records and publishes a request's prompt progress.
func (s *Server) onPrefill(id string, p scheduler.Progress) {
	s.hub.live.mu.Lock()
	r := s.hub.live.reqs[id]
	if r == nil {
		s.hub.live.mu.Unlock()
		return
	}
	first := r.status.Phase == PhaseQueued
	r.status.Phase = PhasePrefilling
	r.status.PromptTokens, r.status.CachedTokens, r.status.PrefillDone = p.PromptTokens, p.CachedTokens, p.Done
	now := time.Now()
	send := first || p.Done >= p.PromptTokens || now.Sub(r.lastPrefill) >= prefillEventInterval
	if send {
		r.lastPrefill = now
	}
	s.hub.live.mu.Unlock()
	if send && s.hub.active() {
		s.hub.publish(Event{Type: "prefill", Data: PrefillEvent{ID: id, PromptTokens: p.PromptTokens, CachedTokens: p.CachedTokens, Done: p.Done}})
	}
	if first {
		s.publishState()
	}
}

// addTokens counts a request's generated tokens.
func (s *Server) addTokens(id string, n int) {
	if n <= 0 {
		return
	}
	s.hub.live.mu.Lock()
	r := s.hub.live.reqs[id]
	var first bool
	if r != nil {
		if r.firstAt.IsZero() {
			r.firstAt, first = time.Now(), true
			r.status.Phase = PhaseGenerating
			r.status.PrefillDone = r.status.PromptTokens
		}
		r.status.CompletionTokens += n
	}
	s.hub.live.mu.Unlock()
	if first {
		s.publishState()
	}
}

// endRequest finishes a request once: it publishes its summary, taking the
// engine's figures from res when there is one, and the new state at once.
func (s *Server) endRequest(id string, res *scheduler.Result, finish string) {
	s.hub.live.mu.Lock()
	r := s.hub.live.reqs[id]
	if r == nil {
		s.hub.live.mu.Unlock()
		return
	}
	delete(s.hub.live.reqs, id)
	for i, o := range s.hub.live.order {
		if o == id {
			s.hub.live.order = append(s.hub.live.order[:i], s.hub.live.order[i+1:]...)
			break
		}
	}
	sum := r.summary(res, finish, time.Now())
	s.hub.live.last = &sum
	s.hub.live.mu.Unlock()
	if s.hub.active() {
		s.hub.publish(Event{Type: "request", Data: sum})
	}
	s.publishState()
}

// summary is the request's figures: the scheduler's when it finished the
// request, else (cancelled mid-way) the server's own timing.
func (r *liveRequest) summary(res *scheduler.Result, finish string, now time.Time) RequestSummary {
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
	sum.PrefillMS, sum.DecodeMS = turn.MS(prefill), turn.MS(decode)
	sum.DecodeTokensPerSecond = decodeRate(sum.CompletionTokens, msDuration(sum.DecodeMS))
	if read := res != nil || !r.firstAt.IsZero(); read {
		sum.PrefillTokensPerSecond = prefillRate(sum.PromptTokens-sum.CachedTokens, msDuration(sum.PrefillMS))
	}
	return sum
}

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

// Status reports the requests in flight and the last one that ended. It
// does not call into the scheduler (OnPrefill callers may hold it).
func (s *Server) Status() Status {
	if s.remote != nil {
		return s.remoteStatus()
	}
	out := Status{State: StateReady, Model: s.cfg.ModelID, Requests: []RequestStatus{}}
	now := time.Now()
	s.hub.live.mu.Lock()
	defer s.hub.live.mu.Unlock()
	rank := map[string]int{StateReady: 0, PhaseQueued: 1, PhasePrefilling: 2, PhaseGenerating: 3}
	for _, id := range s.hub.live.order {
		r := s.hub.live.reqs[id]
		rs := r.status
		if !r.firstAt.IsZero() {
			rs.TokensPerSecond = decodeRate(rs.CompletionTokens, now.Sub(r.firstAt))
			out.TokensPerSecond += rs.TokensPerSecond
		}
		if rank[rs.Phase] > rank[out.State] {
			out.State = rs.Phase
		}
		if rs.Phase == PhaseQueued {
			out.Queued++
		} else {
			out.Active++
		}
		out.Requests = append(out.Requests, rs)
	}
	if s.hub.live.last != nil {
		last := *s.hub.live.last
		out.Last = &last
	}
	return out
}

func (s *Server) stateEvent() Event { return Event{Type: "state", Data: s.Status()} }

// publishState sends the state now (requests start and end between ticks).
func (s *Server) publishState() {
	if s.hub.active() {
		s.hub.publish(s.stateEvent())
	}
}
