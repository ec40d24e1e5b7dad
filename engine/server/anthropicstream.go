package server

import (
	"net/http"

	"github.com/spoolhq/spool/engine/anthropicsse"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/scheduler"
)

// streamMessages answers with the Anthropic event stream.
func (s *Server) streamMessages(w http.ResponseWriter, r *http.Request, t *turn, st *scheduler.Stream) {
	sse, err := apiwire.StartSSE(w)
	if err != nil {
		s.abandon(t, st)
		return
	}
	b, err := anthropicsse.Start(sse, t.id, s.cfg.ModelID, map[string]int{"input_tokens": len(t.prompt), "output_tokens": 0})
	if err != nil {
		s.abandon(t, st)
		return
	}
	o, err := s.generate(r.Context(), t, st, func(p piece) error {
		if p.reasoning != "" {
			if err := b.Thinking(p.reasoning); err != nil {
				return err
			}
		}
		if p.content != "" {
			if err := b.Text(p.content); err != nil {
				return err
			}
		}
		for _, c := range p.calls {
			if err := b.StartToolUse(toolUseID(c.ID), c.Function.Name); err != nil {
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
			b.Error(failed(r.Context(), err).Anthropic())
		}
		return
	}
	reason, seq := apiwire.AnthropicStop(o.finish, o.stopString)
	if b.Finish(reason, seq, anthropicUsageOf(t, o)) != nil {
		return
	}
	b.End()
}
