package httpguard

import (
	"fmt"
	"net/http"
)

// Error is a request the guard refuses: an HTTP status and the fields of
// the OpenAI error envelope. Config.WriteError renders it in the API's
// envelope.
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

func invalid(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

func unauthorized() *Error {
	return &Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "missing or incorrect API key: send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'"}
}

func forbidden(format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Type: "permission_error", Code: "forbidden", Message: fmt.Sprintf(format, args...)}
}

func unavailable(format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable", Message: fmt.Sprintf(format, args...), RetryAfter: 1}
}

// tooManyMessages refuses more conversation entries than the context of
// limit tokens has tokens.
func tooManyMessages(n, limit int) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded", Param: "messages",
		Message: fmt.Sprintf("this model's context length is %d tokens, but the request has %d messages (each takes at least one token)", limit, n)}
}
