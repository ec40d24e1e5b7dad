package server

import (
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/api/openai"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// OpenAI's chat completions and completions (engine/api/openai): the
// server checks the model name and runs the turns.

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatRequest
	st, ok := startTurn(s, w, r, &req, func(req *openai.ChatRequest) (*turn.Request, error) {
		if err := s.checkModel(req.Model, false); err != nil {
			return nil, err
		}
		return req.Turn(newID("chatcmpl-"))
	})
	if !ok {
		return
	}
	if !req.Stream {
		if rep, ok := s.generateReply(w, r, st); ok {
			writeJSON(w, http.StatusOK, openai.ChatReply(s.answer(st), rep, req.Logprobs))
		}
		return
	}
	sse, err := apiwire.StartSSE(w)
	if err != nil {
		st.Close()
		return
	}
	cs := openai.NewChatStream(sse, s.answer(st), req.Logprobs, req.IncludeUsage())
	if cs.Start() != nil {
		st.Close()
		return
	}
	pump(r, st, cs)
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req openai.CompletionRequest
	var t *turn.Request
	st, ok := startTurn(s, w, r, &req, func(req *openai.CompletionRequest) (_ *turn.Request, err error) {
		if err := s.checkModel(req.Model, false); err != nil {
			return nil, err
		}
		t, err = req.Turn(newID("cmpl-"), s.local.ModelConfig().VocabSize)
		return t, err
	})
	if !ok {
		return
	}
	echo := ""
	if req.Echo {
		if echo = t.Prompt.Text; t.Prompt.Tokens != nil {
			echo = s.local.Tokenizer().Decode(t.Prompt.Tokens, false)
		}
	}
	if !req.Stream {
		if rep, ok := s.generateReply(w, r, st); ok {
			writeJSON(w, http.StatusOK, openai.CompletionReply(s.answer(st), rep, echo, t.Logprobs))
		}
		return
	}
	sse, err := apiwire.StartSSE(w)
	if err != nil {
		st.Close()
		return
	}
	cs := openai.NewCompletionStream(sse, s.answer(st), echo, t.Logprobs, req.IncludeUsage())
	if cs.Start() != nil {
		st.Close()
		return
	}
	pump(r, st, cs)
}

// answer names the answer of the turn st: its id, the served model, now.
func (s *Server) answer(st turn.Stream) openai.Answer {
	return openai.Answer{ID: st.ID(), Model: s.cfg.ModelID, Created: time.Now().Unix()}
}
