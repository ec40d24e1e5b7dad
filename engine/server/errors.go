package server

import (
	"net/http"

	"github.com/spoolhq/spool/engine/access"
	"github.com/spoolhq/spool/engine/api/anthropic"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// writeError answers err in the envelope and the words of the request's
// path (failed).
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	apiwire.WriteError(w, r.URL.Path, failed(r, err))
}

// failed maps err to what r's client is told, in the words of the
// request's path, noting a server error in the request's access record
// (its log line; an internal error marks the engine degraded). A request
// the server ended with an answer (a stop: turn.Stopped) is told that.
// Every answer of an error goes through it, in a body or as a stream's
// error event.
func failed(r *http.Request, err error) *apiwire.Error {
	if e := turn.Stopped(r.Context()); e != nil {
		err = e
	}
	e := turn.Error(err)
	if apiwire.IsAnthropicPath(r.URL.Path) {
		e = anthropic.Error(err)
	}
	return access.Fail(r.Context(), e)
}

// gone reports whether r's client has left: nobody reads an answer.
func gone(r *http.Request) bool { return turn.ClientGone(r.Context()) }

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) { apiwire.WriteJSON(w, status, v) }
