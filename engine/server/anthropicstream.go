package server

import (
	"net/http"

	"github.com/spoolhq/spool/engine/anthropicsse"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/local"
	"github.com/spoolhq/spool/engine/turn"
)

// streamMessages answers with the Anthropic event stream.
func (s *Server) streamMessages(w http.ResponseWriter, r *http.Request, st *local.Stream) {
	sse, err := apiwire.StartSSE(w)
	if err != nil {
		st.Close()
		return
	}
	b, err := anthropicsse.Start(sse, st.ID(), s.cfg.ModelID, map[string]int{"input_tokens": st.PromptTokens(), "output_tokens": 0})
	if err != nil {
		st.Close()
		return
	}
	end, err := s.generate(r.Context(), st, func(p turn.Piece) error {
		if p.Reasoning != "" {
			if err := b.Thinking(p.Reasoning); err != nil {
				return err
			}
		}
		if p.Text != "" {
			if err := b.Text(p.Text); err != nil {
				return err
			}
		}
		for _, c := range p.Calls {
			if err := b.StartToolUse(toolUseID(c.ID), c.Name); err != nil {
				return err
			}
			if err := b.InputJSON(string(toolInput(c))); err != nil {
				return err
			}
			if err := b.Stop(); err != nil {
				return err
			}
		}
		return nil
	}, b.Ping)
	if err != nil {
		if r.Context().Err() == nil {
			b.Error(anthropicError(err).Anthropic())
		}
		return
	}
	reason, seq := apiwire.AnthropicStop(end.Finish, end.StopSequence)
	if b.Finish(reason, seq, anthropicUsageOf(end.Usage)) != nil {
		return
	}
	b.End()
}
