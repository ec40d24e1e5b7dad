package glm

import (
	"slices"
	"strings"
	"unicode"

	"github.com/spoolhq/spool/engine/chat"
)

// Parser turns a GLM reply into pieces as its text streams in: reasoning
// (<think>…</think>), visible text, and tool calls
// (<tool_call>…</tool_call>), as the model's chat template writes them.
// The text may be cut anywhere, inside a tag or a character; what a piece
// holds does not depend on the cuts but for when it comes out.
//
// A Parser is not safe for concurrent use.
type Parser struct {
	think *ReasoningSplitter // nil: the reply is plain text
	calls *toolStream        // nil: no tools
}

// Options describe the prompt a reply follows.
type Options struct {
	// Chat says the prompt is a chat template's generation prompt:
	// reasoning is split from the text. Without it the reply is plain
	// text (a raw completion).
	Chat bool
	// InThink says the prompt leaves a <think> block open
	// (PromptOpensThink): the reply starts with reasoning.
	InThink bool
	// Tools, when set, turn tool-call markup into calls.
	Tools []chat.Tool
	// Forced is the call markup the prompt already wrote (ForcedCall): the
	// reply goes on with that call, and an unclosed call at its end is
	// closed rather than shown as text.
	Forced string
}

// NewParser returns the parser of a reply to the prompt o describes.
func NewParser(o Options) *Parser {
	p := &Parser{}
	if o.Chat {
		p.think = SplitReasoning(o.InThink)
	}
	if len(o.Tools) > 0 {
		p.calls = &toolStream{tools: o.Tools, forced: o.Forced != ""}
		if o.Forced != "" {
			p.calls.write(o.Forced)
		}
	}
	return p
}

// Piece is what one step of a reply adds.
type Piece struct {
	Reasoning string
	Text      string
	// Calls are the tool calls completed.
	Calls []ParsedCall
}

// Empty reports whether the piece adds nothing.
func (p Piece) Empty() bool { return p.Reasoning == "" && p.Text == "" && len(p.Calls) == 0 }

// End says whether the text given to Add ends the reply, and how.
type End int

const (
	// More: more text follows.
	More End = iota
	// Stop: the reply ended (the model stopped, or a stop string
	// matched): what was held back comes out, and an unclosed call with
	// every required argument is kept.
	Stop
	// Cut: the reply ran out of tokens: an unclosed call is incomplete and
	// dropped.
	Cut
)

// Add takes the next text of the reply and returns what it completes; end
// says whether it is the last.
func (p *Parser) Add(text string, end End) Piece {
	var out Piece
	content := text
	if p.think != nil {
		r, c := p.think.Write(text)
		if end != More {
			fr, fc := p.think.Flush()
			r, c = r+fr, c+fc
		}
		out.Reasoning, content = r, c
	}
	if p.calls != nil {
		c, calls := p.calls.write(content)
		if end != More {
			fc, fcalls := p.calls.flush(end == Cut)
			c += fc
			calls = append(calls, fcalls...)
		}
		content, out.Calls = c, calls
	}
	out.Text = content
	return out
}

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
func (t *toolStream) write(text string) (string, []ParsedCall) {
	var out strings.Builder
	var calls []ParsedCall
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
// unclosed call is parsed with the salvage rules of ParseToolCalls and
// kept when it has every required argument; a forced call is dropped
// rather than shown as text.
func (t *toolStream) flush(cut bool) (string, []ParsedCall) {
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
		calls = slices.DeleteFunc(calls, func(c ParsedCall) bool { return len(MissingArguments(c, t.tools)) > 0 })
		if len(calls) > 0 || t.forced {
			return "", calls
		}
		rest = toolCallOpen + rest
	}
	t.emit(&out, rest)
	return out.String(), nil
}

func (t *toolStream) parse(markup string) []ParsedCall {
	_, calls, err := ParseToolCalls(markup, t.tools)
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
	vo, vc := strings.LastIndex(body, argValueOpen), strings.LastIndex(body, argValueClose)
	ko := strings.LastIndex(body, argKeyOpen)
	switch {
	case vo > vc && vo > ko:
		body += argValueClose
	case ko > vo && ko > vc:
		body = body[:ko]
	}
	return body + toolCallClose
}
