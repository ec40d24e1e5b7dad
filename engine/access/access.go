package access

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
)

// Message is the message of the access record logged when a request ends,
// one record per request (and per response of a Responses WebSocket): a
// request log selects records by it. Its attributes:
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
// The level is Error for an internal error, Warn for another server
// error, Debug for quiet requests (/health, the UI's files), Info
// otherwise.
const Message = "request"

// Record is what the access record of one request says; the handlers fill
// it as the request goes. Its methods are safe for concurrent use, and a
// nil Record (a request outside Handler) takes every note and keeps none.
type Record struct {
	start    time.Time
	method   string
	path     string
	client   string
	agent    string
	health   *Health
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

type recordKey struct{}

// NewRecord starts the record of r, a request of method (r.Method when
// empty) whose internal errors degrade health (nil: none).
func NewRecord(r *http.Request, method string, health *Health) *Record {
	if method == "" {
		method = r.Method
	}
	return &Record{start: time.Now(), method: method, path: r.URL.Path, client: r.RemoteAddr, agent: r.UserAgent(), health: health}
}

// From is the access record of ctx's request, or nil.
func From(ctx context.Context) *Record {
	rec, _ := ctx.Value(recordKey{}).(*Record)
	return rec
}

// With is ctx carrying rec.
func With(ctx context.Context, rec *Record) context.Context {
	return context.WithValue(ctx, recordKey{}, rec)
}

// Fail notes e, answered to the client of ctx's request, in its record
// (Record.Fail), and returns it.
func Fail(ctx context.Context, e *apiwire.Error) *apiwire.Error {
	From(ctx).Fail(e)
	return e
}

// SetEndpoint names the route the request took.
func (rec *Record) SetEndpoint(pattern string) {
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.endpoint = pattern
	rec.mu.Unlock()
}

// SetQuiet logs the request at level Debug: a health check, a file of
// the UI.
func (rec *Record) SetQuiet() {
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.quiet = true
	rec.mu.Unlock()
}

// SetTokens records a generation or an embedding of the served model.
func (rec *Record) SetTokens(model string, prompt, output int, finish string) {
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.model, rec.prompt, rec.output, rec.finish, rec.tokens = model, prompt, output, finish, true
	rec.mu.Unlock()
}

// Fail records the error answered to the client: a server error's cause
// goes into the record (once: the first), and an internal one marks the
// engine degraded.
func (rec *Record) Fail(e *apiwire.Error) {
	if rec == nil || e == nil || e.Status < http.StatusInternalServerError {
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
		rec.health.Degrade(e.Message)
	}
}

// Handler logs an access record to log for every request next serves;
// internal errors degrade health.
func Handler(log *slog.Logger, health *Health, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := NewRecord(r, "", health)
		sw := &statusWriter{ResponseWriter: w}
		defer func() { rec.Log(log, sw.status) }()
		next.ServeHTTP(sw, r.WithContext(With(r.Context(), rec)))
	})
}

// Log logs rec, which ended with status (0: nothing was written, which
// net/http answers 200).
func (rec *Record) Log(log *slog.Logger, status int) {
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
	if !log.Enabled(ctx, level) {
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
	log.LogAttrs(ctx, level, Message, attrs...)
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
