package server

import (
	"net/http"

	"github.com/spoolhq/spool/engine/api/anthropic"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// apiError is an error answered to the client (apiwire.Error).
type apiError = apiwire.Error

// invalid reports a bad request parameter.
func invalid(param, format string, args ...any) *apiError {
	return apiwire.Invalid(param, format, args...)
}

func notFound(code, format string, args ...any) *apiError {
	return apiwire.NotFound(code, format, args...)
}

func forbidden(format string, args ...any) *apiError { return apiwire.Forbidden(format, args...) }

func internalError(err error) *apiError { return apiwire.Internal(err) }

// contextLength refuses a request the context of limit tokens cannot hold;
// the message goes on from "this model's context length is N tokens, but".
func contextLength(limit int, format string, args ...any) *apiError {
	return apiwire.ContextLength(limit, format, args...)
}

// asAPIError maps any error to an apiError.
func asAPIError(err error) *apiError { return turn.Error(err) }

// writeError answers err in the envelope and the words of the request's
// path.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := asAPIError(err)
	if apiwire.IsAnthropicPath(r.URL.Path) {
		e = anthropic.Error(err)
	}
	apiwire.WriteError(w, r.URL.Path, e)
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) { apiwire.WriteJSON(w, status, v) }
