package server

import (
	"context"

	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/status"
)

// What the UI and the menu bar are told about the requests in flight: the
// server's requests report to the engine's status board (engine/status),
// and the server publishes its events as they happen.
//
// Events on the websocket:
//
//	{"type":"prefill","data":{"id":…,"prompt_tokens":…,"cached_tokens":…,"done":…}}
//	{"type":"request","data":<status.RequestSummary>}   (a request ended)
//	{"type":"state","data":<status.Status>}              (at once on every start and end)

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
	s.board.Begin(id, prompt)
	context.AfterFunc(ctx, func() { s.endRequest(id, nil, scheduler.FinishCancelled) })
	s.publishState()
}

// onPrefill records and publishes a request's prompt progress.
func (s *Server) onPrefill(id string, p scheduler.Progress) {
	ev, started := s.board.Prefill(id, p)
	if ev != nil && s.hub.active() {
		s.hub.publish(Event{Type: "prefill", Data: *ev})
	}
	if started {
		s.publishState()
	}
}

// addTokens counts a request's generated tokens.
func (s *Server) addTokens(id string, n int) {
	if s.board.Tokens(id, n) {
		s.publishState()
	}
}

// endRequest finishes a request once: it publishes its summary, taking the
// engine's figures from res when there is one, and the new state at once.
func (s *Server) endRequest(id string, res *scheduler.Result, finish string) {
	sum := s.board.End(id, res, finish)
	if sum == nil {
		return
	}
	if s.hub.active() {
		s.hub.publish(Event{Type: "request", Data: *sum})
	}
	s.publishState()
}

// Status reports the requests in flight and the last one that ended (or
// the remote engine's state). It does not call into the scheduler
// (OnPrefill callers may hold it).
func (s *Server) Status() status.Status { return s.board.Status() }

// Board is the engine's status board the server reports to.
func (s *Server) Board() *status.Board { return s.board }

func (s *Server) stateEvent() Event { return Event{Type: "state", Data: s.Status()} }

// publishState sends the state now (requests start and end between ticks).
func (s *Server) publishState() {
	if s.hub.active() {
		s.hub.publish(s.stateEvent())
	}
}
