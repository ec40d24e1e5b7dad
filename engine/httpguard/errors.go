package httpguard

import (
	"net/http"

	"github.com/spoolhq/spool/engine/apiwire"
)

// A refusal of the guard is an *apiwire.Error, the error every API front
// answers; Config.WriteError renders it in the API's envelope. These are
// the guard's own; the others are apiwire's (Invalid, Forbidden,
// Unavailable, TooManyMessages).

func unauthorized() *apiwire.Error {
	return &apiwire.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "missing or incorrect API key: send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'"}
}

func tooManyConnections() *apiwire.Error {
	return &apiwire.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "too_many_connections",
		Message: "the server has too many open connections; retry shortly", RetryAfter: 1}
}
