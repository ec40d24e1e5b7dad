package glm

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// ReasoningSplitter separates GLM reasoning (<think>…</think>) from visible
// content as generated text arrives in pieces of any size. A tag split
// across pieces is held back until it is complete. The think tags never
// appear in either output; a stray closing tag in content or a nested
// opening tag in reasoning is dropped. Each output is stripped of leading
// and trailing whitespace as a whole: leading whitespace is dropped, and
// trailing whitespace is held back until more text of the same kind
// follows. The result does not depend on how the text was cut into pieces.
//
// An incomplete UTF-8 sequence at the end of a piece is held back too, so
// pieces may be cut inside a character.
//
// A ReasoningSplitter is not safe for concurrent use.
type ReasoningSplitter struct {
	inThink bool
	// pending is a suffix that may begin a tag.
	pending string
	// started reports whether each output has emitted text (index 0:
	// content, 1: reasoning).
	started [2]bool
	// space is trailing whitespace held back from the current output.
	space string
}

// SplitReasoning returns a splitter. inThink is the state the prompt left
// the model in: true when the generation prompt ends with an open <think>
// (see PromptOpensThink), so that the first text is reasoning.
func SplitReasoning(inThink bool) *ReasoningSplitter {
	return &ReasoningSplitter{inThink: inThink}
}

// PromptOpensThink reports whether a rendered prompt leaves a <think> block
// open, that is whether its last <think> comes after its last </think>.
func PromptOpensThink(prompt string) bool {
	open := strings.LastIndex(prompt, thinkOpen)
	return open >= 0 && open > strings.LastIndex(prompt, thinkClose)
}

// Write consumes the next piece of generated text and returns the
// reasoning and content that can be emitted now.
func (s *ReasoningSplitter) Write(text string) (reasoning, content string) {
	var r, c strings.Builder
	buf := s.pending + text
	s.pending = ""
	for buf != "" {
		// In reasoning, </think> ends the block and a nested <think> is
		// dropped; in content, <think> starts a block and a stray
		// </think> is dropped.
		at, tag := firstTag(buf)
		if at < 0 {
			keep := max(partialTagLen(buf), partialRuneLen(buf))
			s.emit(&r, &c, buf[:len(buf)-keep])
			s.pending = buf[len(buf)-keep:]
			break
		}
		s.emit(&r, &c, buf[:at])
		buf = buf[at+len(tag):]
		if (tag == thinkClose) == s.inThink {
			s.inThink = !s.inThink
			s.space = ""
		}
	}
	return r.String(), c.String()
}

// Flush ends the stream and returns what was held back, less trailing
// whitespace.
func (s *ReasoningSplitter) Flush() (reasoning, content string) {
	var r, c strings.Builder
	s.emit(&r, &c, s.pending)
	s.pending = ""
	s.space = ""
	return r.String(), c.String()
}

// emit appends text to the current output, applying the whitespace rules.
func (s *ReasoningSplitter) emit(r, c *strings.Builder, text string) {
	out, idx := c, 0
	if s.inThink {
		out, idx = r, 1
	}
	if !s.started[idx] {
		text = strings.TrimLeftFunc(text, unicode.IsSpace)
		if text == "" {
			return
		}
		s.started[idx] = true
	}
	body := strings.TrimRightFunc(text, unicode.IsSpace)
	if body == "" {
		s.space += text
		return
	}
	out.WriteString(s.space)
	out.WriteString(body)
	s.space = text[len(body):]
}

// firstTag finds the earliest think tag in s.
func firstTag(s string) (int, string) {
	open := strings.Index(s, thinkOpen)
	closing := strings.Index(s, thinkClose)
	switch {
	case open < 0 && closing < 0:
		return -1, ""
	case closing < 0 || (open >= 0 && open < closing):
		return open, thinkOpen
	}
	return closing, thinkClose
}

// partialTagLen returns the length of the longest suffix of s that is a
// proper prefix of a think tag.
func partialTagLen(s string) int {
	for n := min(len(s), len(thinkClose)-1); n > 0; n-- {
		suffix := s[len(s)-n:]
		if strings.HasPrefix(thinkOpen, suffix) || strings.HasPrefix(thinkClose, suffix) {
			return n
		}
	}
	return 0
}

// partialRuneLen returns the length of an incomplete UTF-8 sequence at the
// end of s.
func partialRuneLen(s string) int {
	for n := 1; n <= min(len(s), utf8.UTFMax-1); n++ {
		if utf8.RuneStart(s[len(s)-n]) {
			if utf8.FullRuneInString(s[len(s)-n:]) {
				return 0
			}
			return n
		}
	}
	return 0
}

// CloseThink closes the think block prompt leaves open, if any, so that
// the reply starts at once with its answer: a reply forced into a tool
// call or a JSON format has no room for reasoning.
func CloseThink(prompt string) string {
	if PromptOpensThink(prompt) {
		return prompt + thinkClose
	}
	return prompt
}
