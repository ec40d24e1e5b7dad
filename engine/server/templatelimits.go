package server

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

// templateLimits bounds the render of a prompt for a context of ctxLen
// tokens: its text cannot be longer than ctxLen of the longest tokens, and
// its work grows with the messages.
func (s *Server) templateLimits(ctxLen, messages int) chat.Limits {
	lim := chat.DefaultLimits
	if s.renderBase != (chat.Limits{}) {
		lim = s.renderBase
	}
	lim.MaxOutput = int(min(int64(ctxLen)*int64(s.tokenBytes)+4096, 64<<20))
	lim.MaxSteps += 512 * int64(messages)
	return lim
}
