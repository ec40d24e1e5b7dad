package apiwire

import (
	"encoding/json"
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
}

func (e *Error) Error() string { return e.Message }

// Invalid reports a bad request parameter.
func Invalid(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// NotFound reports a missing model, response or route; code names it.
func NotFound(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: code, Message: fmt.Sprintf(format, args...)}
}

// Internal reports a failure of the server itself.
func Internal(err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "internal_error", Message: err.Error()}
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
	msg := e.Message
	if e.Param != "" && !strings.Contains(msg, e.Param) {
		msg = e.Param + ": " + msg
	}
	return AnthropicError{Type: "error", Error: AnthropicErrorBody{Type: t, Message: msg}}
}

// OllamaError is Ollama's error shape.
type OllamaError struct {
	Error string `json:"error"`
}

// Ollama is e in Ollama's shape.
func (e *Error) Ollama() OllamaError {
	msg := e.Message
	if e.Param != "" && !strings.Contains(msg, e.Param) {
		msg = e.Param + ": " + msg
	}
	return OllamaError{Error: msg}
}

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
