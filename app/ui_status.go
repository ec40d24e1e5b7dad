package main

import (
	"fmt"
	"math"

	"github.com/spoolhq/spool/engine/status"
)

// serverStatus is the serving engine's own status (requests in flight,
// the last reply's figures), the one the UI's sidebar shows; false when
// no server runs.
func (h *supervisor) serverStatus() (status.Status, bool) {
	if !h.serving() {
		return status.Status{}, false
	}
	return h.board.Status(), true
}

// statusLine is the menu bar's first line: the supervisor's state, and while it
// serves, what the server says (ready the moment a request ends, and one
// tok/s figure per reply, the request's own).
func statusLine(st engineStatus, srv *status.Status) string {
	switch st.State {
	case engineLoading:
		return fmt.Sprintf("Loading… %d%%", int(st.Progress*100))
	case engineFailed:
		return "Failed: " + st.Detail
	case engineStopped:
		return "Stopped"
	}
	if srv == nil {
		return "Ready · " + st.URL
	}
	if srv.Remote != nil {
		return remoteStatusLine(srv)
	}
	switch srv.State {
	case status.Queued:
		return "Waiting for a free slot"
	case status.Prefilling:
		for _, r := range srv.Requests {
			if r.Phase == status.Prefilling && r.PromptTokens > 0 {
				return fmt.Sprintf("Reading prompt · %d%%", 100*r.PrefillDone/r.PromptTokens)
			}
		}
		return "Reading prompt"
	case status.Generating:
		return "Generating · " + formatRate(srv.TokensPerSecond) + " tok/s"
	}
	line := "Ready · " + srv.Model
	if srv.Last != nil && srv.Last.DecodeTokensPerSecond > 0 {
		line += " · last reply " + formatRate(srv.Last.DecodeTokensPerSecond) + " tok/s"
	}
	return line
}

// formatRate is a tok/s figure as the UI writes it: one decimal below 100.
func formatRate(x float64) string {
	if x >= 100 {
		return fmt.Sprintf("%.0f", math.Round(x))
	}
	return fmt.Sprintf("%.1f", x)
}
