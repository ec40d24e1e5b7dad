package server

import (
	"context"
	"net/http"

	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/local"
	"github.com/spoolhq/spool/engine/turn"
)

// submit starts a turn on the local engine; the request's parse slot ends
// once it is queued.
func (s *Server) submit(ctx context.Context, req *turn.Request) (*local.Stream, error) {
	st, err := s.local.Start(ctx, req)
	httpguard.EndParsing(ctx)
	return st, err
}

// submitTurn starts a turn on the server's engine: the local one (the
// parse slot ends once it is queued) or the remote front (before it is
// sent: the body is read, and the remote's answer may take long).
func (s *Server) submitTurn(r *http.Request, t *turn.Request) (turn.Stream, error) {
	if s.remote == nil {
		return s.submit(r.Context(), t)
	}
	httpguard.EndParsing(r.Context())
	return s.turns.Submit(r.Context(), t)
}

// startTurn decodes a request body into req, translates it into a turn
// with build and submits it: the start every generating endpoint shares.
// On an error it has answered the client and returns ok false.
func startTurn[R any](s *Server, w http.ResponseWriter, r *http.Request, req *R, build func(*R) (*turn.Request, error)) (st *local.Stream, ok bool) {
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
		if r.Context().Err() == nil {
			writeError(w, r, err)
		}
		return nil, false
	}
	return rep, true
}

// generate reads a turn's stream to the end, handing its output to
// onPiece; onIdle is called for each keep-alive. An error from either
// callback ends the turn.
func (s *Server) generate(ctx context.Context, st turn.Stream, onPiece func(turn.Piece) error, onIdle func() error) (*turn.End, error) {
	defer st.Close()
	for {
		p, err := st.Next(ctx)
		if err != nil {
			return nil, err
		}
		if p.Idle {
			if onIdle != nil {
				if err := onIdle(); err != nil {
					return nil, err
				}
			}
			continue
		}
		if p.Reasoning != "" || p.Text != "" || len(p.Calls) > 0 || len(p.Tokens) > 0 {
			if err := onPiece(p); err != nil {
				return nil, err
			}
		}
		if p.End != nil {
			return p.End, nil
		}
	}
}
