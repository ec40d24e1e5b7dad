package remote

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// The remote key leaves this package in nothing: everything the remote
// sends passes one of the cleaners below before a caller sees it. Errors
// are built by errorf and statusError (every string field cleaned),
// headers by Do, bodies by ReadBody and events by Stream (the bytes
// cleaned, as written and as JSON may escape them), so that what is built
// from them later (an error event's ParseError, a model list, a log line)
// is clean too.

// redacted stands where the key was.
const redacted = "[remote key]"

// minScrubbed is the shortest key that is cleaned out: a shorter one would
// blank ordinary text and is no secret worth the name.
const minScrubbed = 4

// scrub removes the remote key from text that came from the remote or the
// network, so that no error, status or log line carries it.
func (c *Client) scrub(s string) string {
	if len(c.key) < minScrubbed {
		return s
	}
	return strings.ReplaceAll(s, c.key, redacted)
}

// scrubBytes removes the remote key from bytes of the remote's: as
// written, and inside JSON strings that spell it with escapes
// ("\u0073k-…", "a\/b"). A JSON document stays one.
func (c *Client) scrubBytes(b []byte) []byte {
	if len(c.key) < minScrubbed || len(b) == 0 {
		return b
	}
	key := []byte(c.key)
	if bytes.Contains(b, key) {
		b = bytes.ReplaceAll(b, key, []byte(redacted))
	}
	if bytes.IndexByte(b, '\\') < 0 {
		return b
	}
	return c.scrubEscaped(b)
}

// scrubEscaped rewrites each JSON string literal of b that holds an escape
// and decodes to text holding the key. Literals are found by their
// quotes; text that is not JSON is left as it is where it does not decode.
func (c *Client) scrubEscaped(b []byte) []byte {
	var out []byte // nil until a literal is rewritten
	done := 0      // b[:done] is in out
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		end, closed, escaped := stringEnd(b, i)
		if closed && escaped {
			// A string may hold JSON of its own (a tool call's
			// arguments): it is cleaned the same way, to any depth.
			var s string
			if json.Unmarshal(b[i:end+1], &s) == nil {
				if clean := string(c.scrubBytes([]byte(s))); clean != s {
					lit, _ := json.Marshal(clean)
					out = append(append(out, b[done:i]...), lit...)
					done = end + 1
				}
			}
		}
		i = end
	}
	if out == nil {
		return b
	}
	return append(out, b[done:]...)
}

// stringEnd finds the end of the string literal that opens at b[start]:
// its closing quote (closed), or the line end or last byte where a quote
// that opens no literal stops; and whether the literal holds an escape.
func stringEnd(b []byte, start int) (end int, closed, escaped bool) {
	for j := start + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j, true, escaped
		case '\n':
			return j, false, escaped
		}
	}
	return len(b), false, escaped
}

// clean removes the key from every string field of an error.
func (c *Client) clean(e *Error) *Error {
	for _, f := range []*string{&e.Type, &e.Code, &e.Param, &e.Message, &e.RetryAfter} {
		*f = c.scrub(*f)
	}
	return e
}

// scrubHeader removes the key from an answer's header values.
func (c *Client) scrubHeader(h http.Header) {
	if len(c.key) < minScrubbed {
		return
	}
	for name, vs := range h {
		for i, v := range vs {
			if strings.Contains(v, c.key) {
				h[name][i] = c.scrub(v)
			}
		}
	}
}

// scrubEvent removes the key from an event's name, data and bytes.
func (c *Client) scrubEvent(ev Event) Event {
	ev.Name = c.scrub(ev.Name)
	ev.Data = c.scrubBytes(ev.Data)
	ev.Raw = c.scrubBytes(ev.Raw)
	return ev
}
