package server

import (
	"net/http"

	"github.com/spoolhq/spool/engine/api/anthropic"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/turn"
)

// Anthropic's Messages API (engine/api/anthropic), the same for both
// modes: the turn runs on the server's engine, the local one or the
// remote front.

// messagesTurn decodes a messages request and translates it into a turn
// (count: for count_tokens).
func (s *Server) messagesTurn(r *http.Request, req *anthropic.MessagesRequest, count bool) (*turn.Request, error) {
	if err := decodeBody(r, req); err != nil {
		return nil, err
	}
	if s.remote == nil {
		if err := s.checkModel(req.Model, true); err != nil {
			return nil, err
		}
	}
	t, err := req.Turn(newID("msg_"), count)
	if d := req.Dropped(); len(d) > 0 {
		s.noteDropped(r.Context(), "/v1/messages tools", d)
	}
	return t, err
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	var req anthropic.MessagesRequest
	t, err := s.messagesTurn(r, &req, false)
	if err != nil {
		writeError(w, r, err)
		return
	}
	st, err := s.submitTurn(r, t)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if !req.Stream {
		if rep, ok := s.generateReply(w, r, st); ok {
			writeJSON(w, http.StatusOK, anthropic.Reply(st.ID(), rep))
		}
		return
	}
	sse, err := apiwire.StartSSE(w)
	if err != nil {
		st.Close()
		return
	}
	as, err := anthropic.StartStream(sse, st)
	if err != nil {
		st.Close()
		return
	}
	pump(r, st, as)
}

func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	var req anthropic.MessagesRequest
	t, err := s.messagesTurn(r, &req, true)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if s.remote != nil {
		httpguard.EndParsing(r.Context())
	}
	n, err := s.counter.CountTokens(r.Context(), t)
	if err != nil {
		if !gone(r) {
			writeError(w, r, err)
		}
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": n})
}
