package apiwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Error is an error answered to the client: an HTTP status and the
// fields of the OpenAI error envelope {"error":{"message","type","param","code"}}
// (the Anthropic envelope is derived from the status).
type Error struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
	// RetryAfter, when positive, is sent as the Retry-After header (seconds).
	RetryAfter int
	// Cause is the failure behind a server error, for the server's log:
	// it may name local paths, which Message never does. Clients are not
	// told it.
	Cause error
}

func (e *Error) Error() string { return e.Message }

// Unwrap is the cause of a server error.
func (e *Error) Unwrap() error { return e.Cause }

// PublicError is an error that can say what failed in terms a client may
// be told: no local paths, user names or other detail of the machine
// (for example an expert that failed its checksum, named by layer and
// index). Internal tells a client the PublicError of its cause.
type PublicError interface {
	error
	PublicError() string
}

// Public is an error whose text is fit for a client (a PublicError).
func Public(format string, args ...any) error {
	return publicError(fmt.Sprintf(format, args...))
}

type publicError string

func (e publicError) Error() string       { return string(e) }
func (e publicError) PublicError() string { return string(e) }

// PublicMessage is the PublicError text of err's chain, or "".
func PublicMessage(err error) string {
	var pe PublicError
	if errors.As(err, &pe) {
		return pe.PublicError()
	}
	return ""
}

// internalMessage is what a client is told of an internal failure whose
// cause says nothing fit for it.
const internalMessage = "the server failed to answer this request (an internal error: the server's log has its cause)"

// Invalid reports a bad request parameter.
func Invalid(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// NotFound reports a missing model, response or route; code names it.
func NotFound(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: code, Message: fmt.Sprintf(format, args...)}
}

// Internal reports a failure of the server itself: err is its Cause, for
// the log; the client is told the PublicError of err's chain, or only
// that the server failed.
func Internal(err error) *Error {
	msg := internalMessage
	if pub := PublicMessage(err); pub != "" {
		msg = "the server failed to answer this request: " + pub
	}
	return &Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "internal_error", Message: msg, Cause: err}
}

// BodyError is the answer to a request whose body could not be read: 413
// for one larger than the server takes (an *http.MaxBytesError), else a
// 400 naming the failure.
func BodyError(err error) *Error {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("the request body is larger than %d bytes", mb.Limit)}
	}
	return Invalid("", "reading the request body: %v", err)
}

// Forbidden refuses a request the server does not allow (a host, an
// origin).
func Forbidden(format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Type: "permission_error", Code: "forbidden", Message: fmt.Sprintf(format, args...)}
}

// Unavailable reports a server that cannot take the request now; the
// client may retry in a second.
func Unavailable(format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable", Message: fmt.Sprintf(format, args...), RetryAfter: 1}
}

// ShuttingDownRetryAfter is the Retry-After of a request refused or cut
// by a stopping server: long enough for a restart (the app's settings, an
// update) to load the model again.
const ShuttingDownRetryAfter = 30

// ShuttingDown is the answer to a generation a stopping server (or
// engine) refuses or cuts.
func ShuttingDown() *Error {
	e := Unavailable("the server is shutting down; retry once it is back")
	e.Code, e.RetryAfter = "shutting_down", ShuttingDownRetryAfter
	return e
}

// StatusClientClosed is the status logged for a request whose client left
// before its answer (nginx's 499).
const StatusClientClosed = 499

// ClientClosed is the error of a request whose client left (err, its
// context's error): nobody reads the answer, and it is not a failure of
// the server.
func ClientClosed(err error) *Error {
	return &Error{Status: StatusClientClosed, Type: "invalid_request_error", Code: "client_closed_request", Message: "the client closed the request", Cause: err}
}

// ContextLength refuses a request the context of limit tokens cannot
// hold; the message goes on from "this model's context length is N
// tokens, but".
func ContextLength(limit int, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded", Param: "messages",
		Message: fmt.Sprintf("this model's context length is %d tokens, but ", limit) + fmt.Sprintf(format, args...)}
}

// TooManyMessages refuses more conversation entries than the context of
// limit tokens has tokens (each takes at least one).
func TooManyMessages(n, limit int) *Error {
	return ContextLength(limit, "the request has %d messages (each takes at least one token)", n)
}

// OpenAIError is the OpenAI error envelope.
type OpenAIError struct {
	Error OpenAIErrorBody `json:"error"`
}

// OpenAIErrorBody is the OpenAI error envelope's body.
type OpenAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// OpenAI is e in the OpenAI envelope.
func (e *Error) OpenAI() OpenAIError {
	b := OpenAIErrorBody{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		b.Param = &e.Param
	}
	if e.Code != "" {
		b.Code = &e.Code
	}
	return OpenAIError{Error: b}
}

// AnthropicError is the Anthropic error envelope.
type AnthropicError struct {
	Type  string             `json:"type"`
	Error AnthropicErrorBody `json:"error"`
}

// AnthropicErrorBody is the Anthropic error envelope's body.
type AnthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Anthropic is e in the Anthropic envelope, its type derived from the
// status.
func (e *Error) Anthropic() AnthropicError {
	t := "api_error"
	switch e.Status {
	case http.StatusBadRequest:
		t = "invalid_request_error"
	case http.StatusUnauthorized:
		t = "authentication_error"
	case http.StatusForbidden:
		t = "permission_error"
	case http.StatusNotFound:
		t = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		t = "request_too_large"
	case http.StatusTooManyRequests:
		t = "rate_limit_error"
	case http.StatusServiceUnavailable:
		t = "overloaded_error"
	}
	return AnthropicError{Type: "error", Error: AnthropicErrorBody{Type: t, Message: e.paramMessage()}}
}

// paramMessage is the message of the envelopes that have no param field
// (Anthropic's, Ollama's): the param leads it unless the message names it.
func (e *Error) paramMessage() string {
	if e.Param != "" && !strings.Contains(e.Message, e.Param) {
		return e.Param + ": " + e.Message
	}
	return e.Message
}

// OllamaError is Ollama's error shape.
type OllamaError struct {
	Error string `json:"error"`
}

// Ollama is e in Ollama's shape.
func (e *Error) Ollama() OllamaError { return OllamaError{Error: e.paramMessage()} }

// WriteJSON answers v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

// OllamaPrefix is the path prefix of Ollama's API.
const OllamaPrefix = "/api/"

// IsOllamaPath reports whether path belongs to Ollama's API (its errors
// take Ollama's {"error": "..."} shape).
func IsOllamaPath(path string) bool { return strings.HasPrefix(path, OllamaPrefix) }

// IsAnthropicPath reports whether path belongs to Anthropic's Messages API
// (its errors take Anthropic's envelope).
func IsAnthropicPath(path string) bool {
	return path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/")
}

// WriteError answers e in the envelope of path's API (Anthropic's,
// Ollama's, else OpenAI's), with Retry-After when e sets it.
func WriteError(w http.ResponseWriter, path string, e *Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	var body any = e.OpenAI()
	if IsAnthropicPath(path) {
		body = e.Anthropic()
	} else if IsOllamaPath(path) {
		body = e.Ollama()
	}
	WriteJSON(w, e.Status, body)
}
