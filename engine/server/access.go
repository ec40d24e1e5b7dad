package server

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// AccessMessage is the message of the access record the server logs
// through its Logger when a request ends, one record per request (and per
// response of a Responses WebSocket): a request log selects records by
// it. Its attributes:
//
//	method, endpoint   the route ("POST /v1/chat/completions"; the path for
//	                   the UI and unknown routes), as the client sent it
//	status             the HTTP status (200 for a stream that then failed)
//	duration           from the request's start to its end
//	client, user_agent the peer's address and User-Agent
//	model              the served model, when the request generated or
//	                   embedded
//	prompt_tokens,     the tokens read and written, when it did
//	completion_tokens
//	finish             how a generation ended (stop, length, tool_calls,
//	                   cancelled, error)
//	error              the cause of a server error (5xx, or a stream's
//	                   error event): the one line the log has of it
//
// Prompt and reply text are never part of it. Client-chosen strings are
// attribute values, which the handlers of log/slog quote; the level is
// Error for an internal error, Warn for another server error, Debug for
// /health and the UI's files, Info otherwise.
const AccessMessage = "request"

// accessRecord is what the access record of one request says; the
// handlers fill it as the request goes.
type accessRecord struct {
	start    time.Time
	method   string
	path     string
	client   string
	agent    string
	health   *health
	mu       sync.Mutex
	endpoint string
	model    string
	prompt   int
	output   int
	tokens   bool
	finish   string
	cause    error
	internal bool
	quiet    bool
}

type accessKey struct{}

// recordOf is the access record of the request of ctx, or nil.
func recordOf(ctx context.Context) *accessRecord {
	rec, _ := ctx.Value(accessKey{}).(*accessRecord)
	return rec
}

// setEndpoint names the route the request took.
func (rec *accessRecord) setEndpoint(pattern string) {
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.endpoint = pattern
	rec.mu.Unlock()
}

// setQuiet logs the request at level Debug: a health check, a file of
// the UI.
func (rec *accessRecord) setQuiet() {
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.quiet = true
	rec.mu.Unlock()
}

// setTokens records a generation or an embedding of the served model.
func (rec *accessRecord) setTokens(model string, prompt, output int, finish string) {
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.model, rec.prompt, rec.output, rec.finish, rec.tokens = model, prompt, output, finish, true
	rec.mu.Unlock()
}

// fail records the error answered to the client: a server error's cause
// goes into the record (once: the first), and an internal one marks the
// engine degraded.
func (rec *accessRecord) fail(e *apiError) {
	if rec == nil || e.Status < http.StatusInternalServerError {
		return
	}
	cause := e.Cause
	if cause == nil {
		cause = e
	}
	internal := e.Status == http.StatusInternalServerError
	rec.mu.Lock()
	first := rec.cause == nil
	if first {
		rec.cause, rec.internal = cause, internal
	}
	rec.mu.Unlock()
	if first && internal && rec.health != nil {
		rec.health.degrade(e.Message)
	}
}

// withAccess logs an access record for every request next serves.
func (s *Server) withAccess(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &accessRecord{start: time.Now(), method: r.Method, path: r.URL.Path, client: r.RemoteAddr, agent: r.UserAgent(), health: s.health}
		sw := &statusWriter{ResponseWriter: w}
		defer func() { s.logAccess(rec, sw.status) }()
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), accessKey{}, rec)))
	})
}

// logAccess logs rec, which ended with status (0: nothing was written,
// which net/http answers 200).
func (s *Server) logAccess(rec *accessRecord, status int) {
	if status == 0 {
		status = http.StatusOK
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	level := slog.LevelInfo
	switch {
	case rec.internal:
		level = slog.LevelError
	case rec.cause != nil:
		level = slog.LevelWarn
	case rec.quiet: // a degraded /health answers 503 at every poll
		level = slog.LevelDebug
	case status >= http.StatusInternalServerError:
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if !s.log.Enabled(ctx, level) {
		return
	}
	endpoint := rec.endpoint
	if endpoint == "" {
		endpoint = rec.method + " " + rec.path
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("endpoint", endpoint),
		slog.Int("status", status),
		slog.Duration("duration", time.Since(rec.start).Round(time.Microsecond)),
		slog.String("client", rec.client),
		slog.String("user_agent", rec.agent),
	)
	if rec.tokens {
		attrs = append(attrs, slog.String("model", rec.model), slog.Int("prompt_tokens", rec.prompt), slog.Int("completion_tokens", rec.output))
		if rec.finish != "" {
			attrs = append(attrs, slog.String("finish", rec.finish))
		}
	}
	if rec.cause != nil {
		attrs = append(attrs, slog.String("error", rec.cause.Error()))
	}
	s.log.LogAttrs(ctx, level, AccessMessage, attrs...)
}

// statusWriter notes the status a handler answers. It passes Flush and
// Hijack on (streams, websockets) and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the response (server-sent events).
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over (a websocket upgrade: status 101).
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

// Unwrap is the writer underneath (http.ResponseController).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// health is the engine's health as /health reports it: degraded from the
// first internal error on, with the latest cause.
type health struct {
	mu     sync.Mutex
	since  time.Time
	latest time.Time
	cause  string // what the latest one's client was told
	count  int
}

// degrade notes an internal error, told to its client as message (which
// names no local path).
func (h *health) degrade(message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if h.count == 0 {
		h.since = now
	}
	h.count++
	h.latest, h.cause = now, message
}

// healthReport is /health's answer.
type healthReport struct {
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

func (h *health) report() (healthReport, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count == 0 {
		return healthReport{Status: "ok"}, true
	}
	since, latest := h.since, h.latest
	return healthReport{Status: "degraded", Error: h.cause, Since: &since, Latest: &latest, Errors: h.count}, false
}
