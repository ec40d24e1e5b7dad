package local

import (
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/tokenizer"
)

// maxTokenBytes is the length of the longest token's text.
func maxTokenBytes(tok *tokenizer.Tokenizer) int {
	n := 1
	for id := range tok.VocabSize() {
		if b, ok := tok.TokenBytes(id); ok {
			n = max(n, len(b))
		}
	}
	return n
}

// renderLimits bounds the render of a prompt for a context of ctxLen
// tokens: its text cannot be longer than ctxLen of the longest tokens, and
// its work grows with the messages.
func (e *Engine) renderLimits(ctxLen, messages int) chat.Limits {
	lim := chat.DefaultLimits
	if e.cfg.RenderLimits != (chat.Limits{}) {
		lim = e.cfg.RenderLimits
	}
	lim.MaxOutput = int(min(int64(ctxLen)*int64(e.tokenBytes)+4096, 64<<20))
	lim.MaxSteps += 512 * int64(messages)
	return lim
}
