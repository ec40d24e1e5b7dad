package server

import (
	"net/http"

	"github.com/spoolhq/spool/engine/api/anthropic"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// writeError answers err in the envelope and the words of the request's
// path.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := turn.Error(err)
	if apiwire.IsAnthropicPath(r.URL.Path) {
		e = anthropic.Error(err)
	}
	apiwire.WriteError(w, r.URL.Path, e)
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) { apiwire.WriteJSON(w, status, v) }
