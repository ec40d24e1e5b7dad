package server

import (
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/api/responses"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// The Responses API (engine/api/responses): POST /v1/responses runs a
// turn, GET /v1/responses/{id} answers a stored response, and GET
// /v1/responses with Upgrade: websocket is its WebSocket mode
// (responsesws.go).

func (s *Server) handleGetResponse(w http.ResponseWriter, r *http.Request) {
	st, ok := s.responses.Get(r.PathValue("id"))
	if !ok {
		writeError(w, r, apiwire.NotFound("response_not_found", "the response %q is not known to this server", r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, st.Response)
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	var req responses.Request
	st, ok := startTurn(s, w, r, &req, func(req *responses.Request) (*turn.Request, error) {
		if err := s.checkModel(req.Model, false); err != nil {
			return nil, err
		}
		var prev *responses.State
		if id := req.PreviousResponseID; id != "" {
			var ok bool
			if prev, ok = s.responses.Get(id); !ok {
				prev, _ = responses.ConnStore(r.Context()).Get(id)
			}
		}
		t, err := req.Turn(newID("resp_"), prev)
		if d := req.Dropped(); len(d) > 0 {
			s.noteDropped(r.Context(), "/v1/responses hosted tools", d)
		}
		return t, err
	})
	if !ok {
		return
	}
	var sse *apiwire.SSE
	if req.Stream {
		var err error
		if sse, err = apiwire.StartSSE(w); err != nil {
			st.Close()
			return
		}
	}
	smp := s.local.Sampling(turn.Sampling{Temperature: req.Temperature, TopP: req.TopP})
	a := req.Answer(st.ID(), s.cfg.ModelID, time.Now().Unix(), smp.Temperature, smp.TopP, sse)
	if err := a.Start(); err != nil {
		st.Close()
		return
	}
	if _, err := pump(r, st, a); err != nil {
		if !gone(r) && sse == nil {
			writeError(w, r, err)
		}
		return
	}
	if req.Stored() {
		s.responses.Put(st.ID(), a.State())
	} else {
		responses.ConnStore(r.Context()).Put(st.ID(), a.State())
	}
	if sse == nil {
		writeJSON(w, http.StatusOK, a.Response())
		return
	}
	a.Complete()
}
