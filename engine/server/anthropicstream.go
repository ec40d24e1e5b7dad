package server

import (
	"net/http"

	"github.com/spoolhq/spool/engine/scheduler"
)

// anthropicBlocks writes the content blocks of an Anthropic message
// stream, local or translated from a remote: one block open at a time,
// numbered from 0.
type anthropicBlocks struct {
	sse   *sseWriter
	index int    // the open (or last) block's index; -1 before the first
	open  string // the open block's type; "" when none is open
}

func (b *anthropicBlocks) start(kind string, block map[string]any) error {
	if err := b.stop(); err != nil {
		return err
	}
	b.index++
	b.open = kind
	return b.sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": b.index, "content_block": block})
}

func (b *anthropicBlocks) stop() error {
	if b.open == "" {
		return nil
	}
	b.open = ""
	return b.sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": b.index})
}

func (b *anthropicBlocks) delta(d map[string]any) error {
	return b.sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": b.index, "delta": d})
}

// thinking streams reasoning into a thinking block, starting one unless
// one is open.
func (b *anthropicBlocks) thinking(s string) error {
	if b.open != "thinking" {
		if err := b.start("thinking", map[string]any{"type": "thinking", "thinking": "", "signature": ""}); err != nil {
			return err
		}
	}
	return b.delta(map[string]any{"type": "thinking_delta", "thinking": s})
}

// text streams visible text into a text block, starting one unless one is
// open.
func (b *anthropicBlocks) text(s string) error {
	if b.open != "text" {
		if err := b.start("text", map[string]any{"type": "text", "text": ""}); err != nil {
			return err
		}
	}
	return b.delta(map[string]any{"type": "text_delta", "text": s})
}

// startToolUse starts the tool_use block of a call; its input streams as
// input_json_delta deltas.
func (b *anthropicBlocks) startToolUse(id, name string) error {
	return b.start("tool_use", map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}})
}

// finish stops the open block; an empty reply still gets one (empty) text
// block.
func (b *anthropicBlocks) finish() error {
	if b.index < 0 {
		if err := b.start("text", map[string]any{"type": "text", "text": ""}); err != nil {
			return err
		}
	}
	return b.stop()
}

// streamMessages answers with the Anthropic event stream.
func (s *Server) streamMessages(w http.ResponseWriter, r *http.Request, t *turn, st *scheduler.Stream) {
	sse, err := startSSE(w)
	if err != nil {
		st.Cancel()
		return
	}
	start := map[string]any{"type": "message_start", "message": map[string]any{
		"id": t.id, "type": "message", "role": "assistant", "model": s.cfg.ModelID, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": len(t.prompt), "output_tokens": 0},
	}}
	if sse.event("message_start", start) != nil {
		st.Cancel()
		return
	}
	b := &anthropicBlocks{sse: sse, index: -1}
	o, err := s.generate(r.Context(), t, st, func(p piece) error {
		if p.reasoning != "" {
			if err := b.thinking(p.reasoning); err != nil {
				return err
			}
		}
		if p.content != "" {
			if err := b.text(p.content); err != nil {
				return err
			}
		}
		for _, c := range p.calls {
			if err := b.startToolUse(toolUseID(c.ID), c.Function.Name); err != nil {
				return err
			}
			if err := b.delta(map[string]any{"type": "input_json_delta", "partial_json": string(toolInput(c))}); err != nil {
				return err
			}
			if err := b.stop(); err != nil {
				return err
			}
		}
		return nil
	}, func() error { return sse.event("ping", map[string]string{"type": "ping"}) })
	if err != nil {
		if r.Context().Err() == nil {
			sse.event("error", asAPIError(err).anthropic())
		}
		return
	}
	if b.finish() != nil {
		return
	}
	reason, seq := stopReason(o)
	u := anthropicUsageOf(t, o)
	if sse.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq}, "usage": u}) != nil {
		return
	}
	sse.event("message_stop", map[string]string{"type": "message_stop"})
}
