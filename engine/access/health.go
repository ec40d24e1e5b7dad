package access

import (
	"sync"
	"time"
)

// Health is the engine's health as /health reports it: degraded from the
// first internal error on, with the latest cause. The zero value is
// healthy.
type Health struct {
	mu     sync.Mutex
	since  time.Time
	latest time.Time
	cause  string // what the latest one's client was told
	count  int
}

// Degrade notes an internal error, told to its client as message (which
// names no local path).
func (h *Health) Degrade(message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if h.count == 0 {
		h.since = now
	}
	h.count++
	h.latest, h.cause = now, message
}

// HealthReport is /health's answer.
type HealthReport struct {
	Status string `json:"status"`
	// Error is what the client of the latest internal error was told (no
	// local paths; the log has the cause);
	// Since is when the first happened, Latest the latest, Errors how
	// many there were.
	Error  string     `json:"error,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
	Latest *time.Time `json:"latest,omitempty"`
	Errors int        `json:"internal_errors,omitempty"`
}

// Report is the health's report, and whether it is ok.
func (h *Health) Report() (HealthReport, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count == 0 {
		return HealthReport{Status: "ok"}, true
	}
	since, latest := h.since, h.latest
	return HealthReport{Status: "degraded", Error: h.cause, Since: &since, Latest: &latest, Errors: h.count}, false
}
