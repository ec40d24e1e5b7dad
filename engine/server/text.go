package server

import (
	"slices"
	"strings"
	"unicode"

	"github.com/spoolhq/spool/engine/chat"
)

// stopMatcher finds stop strings in generated text that arrives in pieces.
// Text that could be the start of a stop string is held back until the
// next piece decides; the stop string itself is never emitted.
type stopMatcher struct {
	stops []string
	held  string
}

// write consumes a piece and returns the text that can be emitted; hit
// reports that a stop string completed (its text and what follows are
// dropped).
func (m *stopMatcher) write(text string) (out, hit string) {
	if len(m.stops) == 0 {
		return text, ""
	}
	buf := m.held + text
	at := -1
	for _, s := range m.stops {
		if i := strings.Index(buf, s); i >= 0 && (at < 0 || i < at || (i == at && len(s) > len(hit))) {
			at, hit = i, s
		}
	}
	if at >= 0 {
		m.held = ""
		return buf[:at], hit
	}
	keep := 0
	for _, s := range m.stops {
		for n := min(len(buf), len(s)-1); n > keep; n-- {
			if strings.HasPrefix(s, buf[len(buf)-n:]) {
				keep = n
				break
			}
		}
	}
	m.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], ""
}

// flush returns the held-back text at the end of generation.
func (m *stopMatcher) flush() string {
	out := m.held
	m.held = ""
	return out
}

const (
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
)

// toolStream separates GLM tool-call markup from visible content as it
// streams: text outside <tool_call>…</tool_call> passes through (a partial
// opening tag is held back), and each call is parsed when it closes.
// Whitespace next to a call is dropped.
type toolStream struct {
	tools  []chat.Tool
	buf    string
	inCall bool
	// afterCall drops leading whitespace of the text following a call.
	afterCall bool
	// space is trailing whitespace held back from the content.
	space string
	// forced: the prompt forced a call (tool_choice), so an unclosed call
	// at the end is closed rather than returned as text.
	forced bool
}

// write consumes visible content and returns the content to emit and the
// calls completed.
func (t *toolStream) write(text string) (string, []chat.ParsedCall) {
	var out strings.Builder
	var calls []chat.ParsedCall
	t.buf += text
	for t.buf != "" {
		if t.inCall {
			end := strings.Index(t.buf, toolCallClose)
			if end < 0 {
				break
			}
			body := t.buf[:end+len(toolCallClose)]
			t.buf = t.buf[end+len(toolCallClose):]
			t.inCall = false
			t.afterCall = true
			t.space = ""
			cs := t.parse(toolCallOpen + body)
			if cs == nil {
				t.emit(&out, toolCallOpen+body)
			}
			calls = append(calls, cs...)
			continue
		}
		open := strings.Index(t.buf, toolCallOpen)
		if open < 0 {
			keep := partialSuffix(t.buf, toolCallOpen)
			t.emit(&out, t.buf[:len(t.buf)-keep])
			t.buf = t.buf[len(t.buf)-keep:]
			break
		}
		t.emit(&out, t.buf[:open])
		t.buf = t.buf[open+len(toolCallOpen):]
		t.inCall = true
		t.space = ""
	}
	return out.String(), calls
}

// flush ends the stream. cut says the generation ran out of tokens: an
// unclosed call is then incomplete and dropped, never reported as a call
// (the finish reason says "length"). Otherwise (the model stopped) an
// unclosed call is parsed with the salvage rules of chat.ParseToolCalls
// and kept when it has every required argument; a forced call is dropped
// rather than shown as text.
func (t *toolStream) flush(cut bool) (string, []chat.ParsedCall) {
	var out strings.Builder
	rest := t.buf
	t.buf = ""
	if t.inCall {
		t.inCall = false
		if cut {
			return "", nil
		}
		calls := t.parse(toolCallOpen + rest)
		if calls == nil && t.forced {
			calls = t.parse(toolCallOpen + closeMarkup(rest))
		}
		calls = slices.DeleteFunc(calls, func(c chat.ParsedCall) bool { return len(chat.MissingArguments(c, t.tools)) > 0 })
		if len(calls) > 0 || t.forced {
			return "", calls
		}
		rest = toolCallOpen + rest
	}
	t.emit(&out, rest)
	return out.String(), nil
}

func (t *toolStream) parse(markup string) []chat.ParsedCall {
	_, calls, err := chat.ParseToolCalls(markup, t.tools)
	if err != nil || len(calls) == 0 {
		return nil
	}
	return calls
}

// emit writes content, holding trailing whitespace back until more
// content follows (whitespace before a call is dropped).
func (t *toolStream) emit(out *strings.Builder, text string) {
	if t.afterCall {
		text = strings.TrimLeftFunc(text, unicode.IsSpace)
		if text == "" {
			return
		}
		t.afterCall = false
	}
	body := strings.TrimRightFunc(text, unicode.IsSpace)
	if body == "" {
		t.space += text
		return
	}
	out.WriteString(t.space)
	out.WriteString(body)
	t.space = text[len(body):]
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasPrefix(tag, s[len(s)-n:]) {
			return n
		}
	}
	return 0
}

// closeMarkup completes an unclosed call body: an open value is closed, a
// partial key is dropped, and the call is closed.
func closeMarkup(body string) string {
	const keyOpen, valueOpen, valueClose = "<arg_key>", "<arg_value>", "</arg_value>"
	vo, vc := strings.LastIndex(body, valueOpen), strings.LastIndex(body, valueClose)
	ko := strings.LastIndex(body, keyOpen)
	switch {
	case vo > vc && vo > ko:
		body += valueClose
	case ko > vo && ko > vc:
		body = body[:ko]
	}
	return body + toolCallClose
}
