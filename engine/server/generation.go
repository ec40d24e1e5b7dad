package server

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/spoolhq/spool/engine/access"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/local"
	"github.com/spoolhq/spool/engine/turn"
)

// submit starts a turn on the local engine; the request's parse slot ends
// once it is queued. The stopper tracks it until it is closed, and its
// access record gets its tokens.
func (s *Server) submit(ctx context.Context, req *turn.Request) (*localTurn, error) {
	if s.stop.stopping() {
		httpguard.EndParsing(ctx)
		return nil, apiwire.ShuttingDown()
	}
	st, err := s.local.Start(ctx, req)
	httpguard.EndParsing(ctx)
	if err != nil {
		return nil, err
	}
	if !s.stop.add(st, turnFlight(st)) { // the server began to stop meanwhile
		st.Close()
		return nil, apiwire.ShuttingDown()
	}
	return &localTurn{Stream: st, rec: recorded{rec: access.From(ctx), model: s.cfg.ModelID, prompt: st.PromptTokens()}, done: func() { s.stop.done(st) }}, nil
}

// submitTurn starts a turn on the server's engine: the local one (the
// parse slot ends once it is queued) or the remote front (before it is
// sent: the body is read, and the remote's answer may take long; the
// stopper tracks the request, withStop).
func (s *Server) submitTurn(r *http.Request, t *turn.Request) (turn.Stream, error) {
	if s.remote == nil {
		return s.submit(r.Context(), t)
	}
	httpguard.EndParsing(r.Context())
	st, err := s.turns.Submit(r.Context(), t)
	if err != nil {
		return nil, err
	}
	return &remoteTurn{Stream: st, rec: recorded{rec: access.From(r.Context()), model: s.cfg.ModelID}}, nil
}

// startTurn decodes a request body into req, translates it into a turn
// with build and submits it: the start every generating endpoint shares.
// On an error it has answered the client and returns ok false.
func startTurn[R any](s *Server, w http.ResponseWriter, r *http.Request, req *R, build func(*R) (*turn.Request, error)) (st *localTurn, ok bool) {
	if err := decodeBody(r, req); err != nil {
		writeError(w, r, err)
		return nil, false
	}
	t, err := build(req)
	if err != nil {
		writeError(w, r, err)
		return nil, false
	}
	if st, err = s.submit(r.Context(), t); err != nil {
		writeError(w, r, err)
		return nil, false
	}
	return st, true
}

// generateReply runs a turn to its end and gathers its pieces. On an error
// it has answered the client (unless the client left) and returns ok false.
func (s *Server) generateReply(w http.ResponseWriter, r *http.Request, st turn.Stream) (*turn.Reply, bool) {
	rep, err := turn.Collect(r.Context(), st)
	if err != nil {
		if !gone(r) {
			writeError(w, r, err)
		}
		return nil, false
	}
	return rep, true
}

// pump writes st's pieces with w as they come (turn.Pump); the error that
// ends the turn is answered as failed words it.
func pump(r *http.Request, st turn.Stream, w turn.Writer) (*turn.End, error) {
	return turn.Pump(r.Context(), st, failing{w, r})
}

// failing is a writer whose Fail writes what failed makes of the error.
type failing struct {
	turn.Writer
	r *http.Request
}

func (f failing) Fail(err error) error { return f.Writer.Fail(failed(f.r, err)) }

// localTurn is a turn of the local engine as the server runs it: the
// stopper tracks it until it is closed, and the request's access record
// gets its tokens and how it ended.
type localTurn struct {
	*local.Stream
	rec  recorded
	done func()
	once sync.Once
}

func (t *localTurn) Next(ctx context.Context) (turn.Piece, error) {
	p, err := t.Stream.Next(ctx)
	t.rec.note(ctx, p, err)
	return p, err
}

func (t *localTurn) Close() {
	t.Stream.Close()
	t.rec.closed()
	t.once.Do(t.done)
}

// remoteTurn is a turn on the remote front, its tokens and end recorded.
type remoteTurn struct {
	turn.Stream
	rec recorded
}

func (t *remoteTurn) Next(ctx context.Context) (turn.Piece, error) {
	p, err := t.Stream.Next(ctx)
	t.rec.note(ctx, p, err)
	return p, err
}

func (t *remoteTurn) Close() {
	t.Stream.Close()
	t.rec.closed()
}

// recorded notes a turn's tokens and end in its request's access record.
type recorded struct {
	rec           *access.Record
	model         string
	prompt, count int
	ended         bool
}

// note reads one piece (or the error that ended the turn).
func (r *recorded) note(ctx context.Context, p turn.Piece, err error) {
	if r.ended {
		return
	}
	r.count += len(p.Tokens)
	switch {
	case err != nil:
		finish := "error"
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || turn.ClientGone(ctx) {
			finish = "cancelled"
		}
		r.ended = true
		r.rec.SetTokens(r.model, max(r.prompt, 0), r.count, finish)
	case p.End != nil:
		r.ended = true
		u := p.End.Usage
		r.rec.SetTokens(r.model, max(u.PromptTokens, r.prompt, 0), max(u.CompletionTokens, r.count), p.End.Finish)
	}
}

// closed notes a turn closed before its end: cancelled.
func (r *recorded) closed() {
	if !r.ended {
		r.ended = true
		r.rec.SetTokens(r.model, max(r.prompt, 0), r.count, "cancelled")
	}
}
