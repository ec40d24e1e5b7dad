package remote

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spoolhq/spool/internal/retryafter"
)

// Kind classifies a failure to get an answer from the remote.
type Kind int

const (
	// KindStatus: the remote answered with an error status (its fields
	// are in the Error).
	KindStatus Kind = iota
	// KindAuth: the remote refused Spool's remote key (401 or 403).
	KindAuth
	// KindUnreachable: no connection, or it broke.
	KindUnreachable
	// KindTimeout: no answer, or a stream fell silent, for the timeout.
	KindTimeout
	// KindProtocol: an answer that is not what the API promises (a
	// redirect, a malformed body, a stream cut short).
	KindProtocol
)

func (k Kind) String() string {
	switch k {
	case KindStatus:
		return "status"
	case KindAuth:
		return "auth"
	case KindUnreachable:
		return "unreachable"
	case KindTimeout:
		return "timeout"
	}
	return "protocol"
}

// Error is a failure to get an answer from the remote, or the remote's
// own error answer. None of its fields holds the remote key when a Client
// built it (redact.go), nor when ParseError reads an event of a Client's
// Stream.
type Error struct {
	Kind Kind
	// Status is the remote's HTTP status (KindStatus, KindAuth).
	Status int
	// Type, Code and Param are the remote's error fields, normalized to
	// the OpenAI taxonomy (vLLM's "BadRequestError" is
	// "invalid_request_error"; a numeric code is dropped).
	Type, Code, Param string
	// Message is the remote's message, or what went wrong.
	Message string
	// RetryAfter is the remote's Retry-After header, if any.
	RetryAfter string
}

func (e *Error) Error() string {
	if e.Kind == KindStatus && e.Status != 0 {
		return fmt.Sprintf("remote: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
	}
	return "remote: " + e.Message
}

func (c *Client) errorf(kind Kind, format string, args ...any) *Error {
	return c.clean(&Error{Kind: kind, Message: fmt.Sprintf(format, args...)})
}

// statusError builds the Error of a non-2xx answer from its body.
func (c *Client) statusError(resp *http.Response, body []byte) *Error {
	e := c.clean(ParseError(resp.StatusCode, c.scrubBytes(body)))
	e.RetryAfter = c.scrub(resp.Header.Get("Retry-After"))
	if e.Kind == KindAuth {
		e.Message = fmt.Sprintf("the remote engine at %s refused Spool's remote key (%d %s: %s): check the key (--remote-key, or the server key in Settings)",
			c.Endpoint(), resp.StatusCode, http.StatusText(resp.StatusCode), e.Message)
	}
	return e
}

// ParseError reads an error answer in any of the shapes OpenAI-compatible
// servers use:
//
//	{"error": {"message", "type", "param", "code"}}            OpenAI, Spool, newer vLLM
//	{"object": "error", "message", "type", "param", "code": 400} vLLM
//	{"error": "Unauthorized"}                                   vLLM's key check
//	{"detail": "Not Found"} or {"detail": [{"msg": ...}]}       FastAPI
//	{"type": "error", "error": {"type", "message"}}             Anthropic
//
// and anything else as its text. It never fails.
func ParseError(status int, body []byte) *Error {
	e := &Error{Kind: KindStatus, Status: status}
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		e.Kind = KindAuth
	}
	fields, ok := errorFields(body)
	if ok {
		e.Message, e.Type, e.Code, e.Param = fields.message, fields.typ, fields.code, fields.param
	}
	if e.Message == "" {
		e.Message = snippet(body)
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	e.Type = normalType(e.Type, status)
	return e
}

type errorBody struct{ message, typ, code, param string }

// errorFields finds the message, type, code and param of an error body.
func errorFields(body []byte) (errorBody, bool) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(body), &top); err != nil {
		return errorBody{}, false
	}
	var out errorBody
	if raw, ok := top["error"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out.message = s
			return out, true
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) == nil {
			return fieldsOf(inner), true
		}
	}
	if raw, ok := top["detail"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out.message = s
			return out, true
		}
		var items []struct {
			Msg string `json:"msg"`
			Loc []any  `json:"loc"`
		}
		if json.Unmarshal(raw, &items) == nil && len(items) > 0 {
			var parts []string
			for _, it := range items {
				parts = append(parts, it.Msg)
				if out.param == "" && len(it.Loc) > 0 {
					out.param = fmt.Sprint(it.Loc[len(it.Loc)-1])
				}
			}
			out.message = strings.Join(parts, "; ")
			return out, true
		}
	}
	if _, ok := top["message"]; ok {
		return fieldsOf(top), true
	}
	return errorBody{}, false
}

func fieldsOf(m map[string]json.RawMessage) errorBody {
	str := func(key string) string {
		var s string
		if json.Unmarshal(m[key], &s) == nil {
			return s
		}
		return ""
	}
	return errorBody{message: str("message"), typ: str("type"), code: str("code"), param: str("param")}
}

// normalType maps an error type to the OpenAI taxonomy. vLLM names its
// types after Python exceptions.
func normalType(t string, status int) string {
	switch t {
	case "BadRequestError", "ValidationError", "UnprocessableEntityError":
		return "invalid_request_error"
	case "NotFoundError":
		return "invalid_request_error"
	case "AuthenticationError", "Unauthorized":
		return "authentication_error"
	case "PermissionDeniedError":
		return "permission_error"
	case "RateLimitError":
		return "rate_limit_error"
	case "InternalServerError", "ServiceUnavailableError", "EngineDeadError", "EngineGenerateError":
		return "server_error"
	}
	if t != "" && strings.ToLower(t) == t && !strings.ContainsAny(t, " \t") {
		return t
	}
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// snippet is the start of a body that is not a JSON error (a proxy's HTML
// page, a plain-text message), as one line of valid UTF-8.
func snippet(body []byte) string {
	const max = 200
	s := strings.TrimSpace(string(body))
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// Overflow is a request over the remote's context, as its error says.
type Overflow struct {
	// Limit is the context in tokens and Prompt the request's input
	// tokens; Prompt < Limit means the output limit, not the prompt, is
	// what does not fit.
	Limit, Prompt int
}

var (
	overflowLimit  = regexp.MustCompile(`maximum context length is (\d+) tokens`)
	overflowPrompt = []*regexp.Regexp{
		regexp.MustCompile(`your request has (\d+) input tokens`), // vLLM
		regexp.MustCompile(`\((\d+) in the messages`),             // older vLLM
	}
)

// ContextOverflow reads a context error's figures, in vLLM's wordings:
//
//	This model's maximum context length is L tokens. However, your request has P input tokens. …
//	'max_tokens' or 'max_completion_tokens' is too large: M. This model's maximum context length is L tokens and your request has P input tokens (M > L - P).
//	This model's maximum context length is L tokens. However, you requested T tokens (P in the messages, M in the completion). …
func ContextOverflow(e *Error) (Overflow, bool) {
	if !IsContextExceeded(e) {
		return Overflow{}, false
	}
	m := overflowLimit.FindStringSubmatch(e.Message)
	if m == nil {
		return Overflow{}, false
	}
	limit, _ := strconv.Atoi(m[1])
	for _, re := range overflowPrompt {
		if p := re.FindStringSubmatch(e.Message); p != nil {
			prompt, _ := strconv.Atoi(p[1])
			return Overflow{Limit: limit, Prompt: prompt}, limit > 0
		}
	}
	return Overflow{}, false
}

// IsContextExceeded reports whether an error says the prompt is longer
// than the remote's context (vLLM: "This model's maximum context length
// is N tokens"; Spool and OpenAI: code context_length_exceeded).
func IsContextExceeded(e *Error) bool {
	if e.Code == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(e.Message)
	return e.Status == http.StatusBadRequest && (strings.Contains(m, "maximum context length") || strings.Contains(m, "context length is"))
}

// RetryAfterSeconds is the remote's Retry-After in seconds, whether it
// sent seconds or an HTTP date (0 when absent or past; at most an hour).
func (e *Error) RetryAfterSeconds() int {
	return retryafter.Seconds(e.RetryAfter, time.Now(), time.Hour)
}
