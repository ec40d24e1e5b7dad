package httpguard

import (
	"bytes"
	"net/http"

	"github.com/spoolhq/spool/engine/apiwire"
)

// A chat body is pre-scanned before it is decoded: a body with more messages
// than the context has tokens is refused for its context after a byte scan
// of a few milliseconds, instead of after decoding every message (about a
// second and a hundred megabytes of garbage for 100,000 of them).

// bufferedBody is a request body read by readBody.
type bufferedBody struct {
	*bytes.Reader
	data []byte
}

func (bufferedBody) Close() error { return nil }

// readBody reads the whole body of a POST (within MaxBodyBytes, which the
// guard applied) into memory, answering 413 or 400 itself when it cannot.
func (s *Guard) readBody(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return r, true
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, s.cfg.MaxBodyBytes)))
	}
	_, err := buf.ReadFrom(r.Body)
	r.Body.Close()
	if err != nil {
		s.writeError(w, r, apiwire.BodyError(err))
		return nil, false
	}
	r.Body = bufferedBody{Reader: bytes.NewReader(buf.Bytes()), data: buf.Bytes()}
	return r, true
}

// prescan refuses a conversation request whose conversation has more
// entries than the context has tokens, from the body readBody read.
func (s *Guard) prescan(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	body, buffered := r.Body.(bufferedBody)
	if !buffered || s.cfg.Conversation == nil {
		return r, true
	}
	key, limit, ok := s.cfg.Conversation(r.URL.Path)
	if !ok {
		return r, true
	}
	n, ok, err := conversationLength(body.data, key, limit+1)
	if err != nil {
		s.writeError(w, r, apiwire.Invalid("", "%v", err))
		return nil, false
	}
	if ok && n > limit {
		s.writeError(w, r, apiwire.TooManyMessages(n, limit))
		return nil, false
	}
	return r, true
}

// arrayLength counts the elements of the array under key (decoded and
// folded as encoding/json matches it) at the top level of a JSON object,
// counting no further than stop. ok is false when body is not such an
// object (the decoder then says what is wrong), key does not hold an
// array, or a top-level field is named twice (see prescankeys.go).
func arrayLength(body []byte, key string, stop int) (n int, ok bool) {
	n, ok, err := conversationLength(body, key, stop)
	return n, ok && err == nil
}

// jsonScan is a minimal JSON walker over a byte slice: it validates only
// what it needs to find its way.
type jsonScan struct {
	b   []byte
	pos int
}

// maxScanDepth bounds the nesting skipValue follows.
const maxScanDepth = 10000

func (s *jsonScan) ws() {
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *jsonScan) consume(c byte) bool {
	s.ws()
	if s.pos < len(s.b) && s.b[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// str reads a string, returned raw (escapes kept); key decodes keys.
func (s *jsonScan) str() (string, bool) {
	s.ws()
	if s.pos >= len(s.b) || s.b[s.pos] != '"' {
		return "", false
	}
	start := s.pos + 1
	for i := start; i < len(s.b); i++ {
		switch s.b[i] {
		case '\\':
			i++
		case '"':
			s.pos = i + 1
			return string(s.b[start:i]), true
		}
	}
	return "", false
}

// skipValue skips one value.
func (s *jsonScan) skipValue(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	s.ws()
	if s.pos >= len(s.b) {
		return false
	}
	switch s.b[s.pos] {
	case '"':
		_, ok := s.str()
		return ok
	case '{', '[':
		open, closer := s.b[s.pos], byte('}')
		if open == '[' {
			closer = ']'
		}
		s.pos++
		if s.consume(closer) {
			return true
		}
		for {
			if open == '{' {
				if _, ok := s.str(); !ok || !s.consume(':') {
					return false
				}
			}
			if !s.skipValue(depth + 1) {
				return false
			}
			if s.consume(closer) {
				return true
			}
			if !s.consume(',') {
				return false
			}
		}
	}
	// A number, true, false or null: up to the next delimiter.
	start := s.pos
	for s.pos < len(s.b) && bytes.IndexByte([]byte(",}] \t\n\r"), s.b[s.pos]) < 0 {
		s.pos++
	}
	return s.pos > start
}

// countArray counts the elements of the array at the scanner, stopping
// once it has counted stop of them.
func (s *jsonScan) countArray(stop int) (int, bool) {
	if !s.consume('[') {
		return 0, false
	}
	if s.consume(']') {
		return 0, true
	}
	n := 0
	for {
		if !s.skipValue(0) {
			return n, false
		}
		n++
		if n >= stop {
			return n, true
		}
		if s.consume(']') {
			return n, true
		}
		if !s.consume(',') {
			return n, false
		}
	}
}
