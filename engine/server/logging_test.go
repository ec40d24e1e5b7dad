package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/remote/standin"
	"github.com/spoolhq/spool/engine/scheduler"
)

// logRecords is a slog.Handler that keeps every record, for tests that
// look at what the server logs.
type logRecords struct {
	mu   sync.Mutex
	cond *sync.Cond
	recs []slog.Record
}

func newLogRecords() *logRecords {
	l := &logRecords{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }

func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	l.cond.Broadcast()
	return nil
}

// all returns the records so far.
func (l *logRecords) all() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Record(nil), l.recs...)
}

// access waits for the n-th access record (from 1) of endpoint: records
// are logged as a request ends, which may be after its client has read
// the answer.
func (l *logRecords) access(endpoint string, n int) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		seen := 0
		for _, r := range l.recs {
			if a := recordAttrs(r); r.Message == AccessMessage && a["endpoint"] == endpoint {
				if seen++; seen == n {
					a["level"] = r.Level.String()
					return a
				}
			}
		}
		l.cond.Wait()
	}
}

// recordAttrs is a record's attributes by key, their values as strings or
// int64s.
func recordAttrs(r slog.Record) map[string]any {
	out := map[string]any{}
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value.Resolve()
		switch v.Kind() {
		case slog.KindInt64:
			out[a.Key] = v.Int64()
		case slog.KindString:
			out[a.Key] = v.String()
		default:
			out[a.Key] = v.String()
		}
		return true
	})
	return out
}

const forged = "\n2026/01/01 00:00:00 ERROR disk failed"

// TestLogForging: strings a client chooses (hosted tool types, Ollama
// option names, a path, a User-Agent) reach the log only as attribute
// values, which slog's handlers quote, never as part of a message: no
// client can write a line of its own into the log.
func TestLogForging(t *testing.T) {
	recs := newLogRecords()
	ts := newTestServer(t, serverOpts{cfg: Config{Logger: slog.New(recs)}})
	status, _, _ := ts.do(t, "POST", "/v1/responses", `{"input":"x","max_output_tokens":2,"tools":[{"type":"web_search`+strings.ReplaceAll(forged, "\n", `\n`)+`"}]}`)
	if status != 200 {
		t.Fatalf("responses: %d", status)
	}
	status, _, _ = ts.do(t, "POST", "/api/chat", `{"model":"glm52-mini","stream":false,"messages":[{"role":"user","content":"x"}],"options":{"num_predict":2,"mirostat`+strings.ReplaceAll(forged, "\n", `\n`)+`":1}}`)
	if status != 200 {
		t.Fatalf("ollama chat: %d", status)
	}
	// A header holds no newline; spaces and "=" fake fields of a text line.
	status, _, _ = ts.do(t, "GET", "/nothing%0A2026/01/01%2000:00:00%20ERROR%20disk%20failed", nil, "User-Agent", `agent level=ERROR msg="disk failed"`)
	if status != 404 {
		t.Fatalf("unknown route: %d", status)
	}
	recs.access("POST /v1/responses", 1)
	recs.access("POST /api/chat", 1)
	recs.access("GET /nothing"+forged, 1)
	var inAttrs, agents int
	for _, r := range recs.all() {
		if recordAttrs(r)["user_agent"] == `agent level=ERROR msg="disk failed"` {
			agents++
		}
		if strings.Contains(r.Message, "disk failed") || strings.Contains(r.Message, "\n") {
			t.Errorf("a client's string in a log message: %q", r.Message)
		}
		for _, v := range recordAttrs(r) {
			if s, ok := v.(string); ok && strings.Contains(s, forged) {
				inAttrs++
			}
		}
	}
	// The tool type, the option name and the path; the User-Agent.
	if inAttrs < 3 || agents != 1 {
		t.Errorf("the forged strings are in %d attributes (want 3 at least), the User-Agent in %d (want 1): %v", inAttrs, agents, recs.all())
	}
	// Through a text handler, every record is one line.
	var buf bytes.Buffer
	text := slog.New(slog.NewTextHandler(&buf, nil))
	for _, r := range recs.all() {
		text.Handler().Handle(context.Background(), r)
	}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if !strings.HasPrefix(line, "time=") {
			t.Errorf("a log line of the client's: %q", line)
		}
	}
}

// failingConstraint fails as the engine does when a model file breaks
// under it: the error names the file by its absolute path.
type failingConstraint struct{}

var errShard = &fs.PathError{Op: "read", Path: "/Users/someone/models/glm/out-00001.safetensors", Err: io.ErrUnexpectedEOF}

func (failingConstraint) Mask(allowed []uint64) {
	for i := range allowed {
		allowed[i] = ^uint64(0)
	}
}
func (failingConstraint) Accept(int) error { return errShard }
func (failingConstraint) Done() bool       { return false }

// TestInternalErrors: an engine failure is answered 500 (or a stream's
// error event) without the server's local paths, logged once with its
// cause in the request's access record at level Error, and turns /health
// to "degraded". Client errors leave /health alone.
func TestInternalErrors(t *testing.T) {
	recs := newLogRecords()
	ts := newTestServer(t, serverOpts{cfg: Config{Logger: slog.New(recs)},
		constraints: func(json.RawMessage) (scheduler.Constraint, error) { return failingConstraint{}, nil }})
	if status, body, _ := ts.do(t, "GET", "/health", nil); status != 200 || body["status"] != "ok" || len(body) != 1 {
		t.Fatalf("/health before: %d %v", status, body)
	}
	// A client error is not the engine's.
	ts.do(t, "POST", "/v1/chat/completions", chatBody(map[string]any{"max_tokens": 0}))
	if status, body, _ := ts.do(t, "GET", "/health", nil); status != 200 || body["status"] != "ok" {
		t.Fatalf("/health after a 400: %d %v", status, body)
	}
	json := map[string]any{"response_format": map[string]any{"type": "json_object"}}
	status, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(json))
	msg, _ := jpath(body, "error", "message").(string)
	if status != 500 || jpath(body, "error", "code") != "internal_error" || strings.Contains(msg, "/Users") || strings.Contains(msg, "safetensors") || msg == "" {
		t.Fatalf("chat: %d %v", status, body)
	}
	a := ts.recsAccess(t, recs, "POST /v1/chat/completions", 2)
	if a["level"] != "ERROR" || a["status"] != int64(500) || !strings.Contains(a["error"].(string), errShard.Path) {
		t.Errorf("access record %v", a)
	}
	// A stream's error event says no more.
	stream := chatBody(json)
	stream["stream"] = true
	evs := ts.stream(t, "/v1/chat/completions", stream)
	last := evs[len(evs)-1].data
	if !strings.Contains(last, "internal_error") || strings.Contains(last, "/Users") {
		t.Errorf("stream's last event %s", last)
	}
	a = ts.recsAccess(t, recs, "POST /v1/chat/completions", 3)
	if a["level"] != "ERROR" || a["status"] != int64(200) || !strings.Contains(a["error"].(string), errShard.Path) {
		t.Errorf("stream's access record %v", a)
	}
	// Logged once each: the access record is the one line with the cause.
	n := 0
	for _, r := range recs.all() {
		for _, v := range recordAttrs(r) {
			if s, ok := v.(string); ok && strings.Contains(s, errShard.Path) {
				n++
			}
		}
	}
	if n != 2 {
		t.Errorf("the cause is in %d records, want 2 (one per failed request)", n)
	}
	status, body, _ = ts.do(t, "GET", "/health", nil)
	if status != http.StatusServiceUnavailable || body["status"] != "degraded" || body["internal_errors"] != 2.0 || body["since"] == nil ||
		strings.Contains(body["error"].(string), "/Users") {
		t.Errorf("/health after the failures: %d %v", status, body)
	}
	// The Responses WebSocket: an error event, one record of its own.
	hdr := http.Header{}
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ts.URL, "http")+"/v1/responses", hdr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.WriteJSON(map[string]any{"type": "response.create", "input": "x", "max_output_tokens": 4, "text": map[string]any{"format": map[string]any{"type": "json_object"}}}); err != nil {
		t.Fatal(err)
	}
	for {
		var ev map[string]any
		if err := conn.ReadJSON(&ev); err != nil {
			t.Fatal(err)
		}
		if ev["type"] == "error" {
			if strings.Contains(ev["message"].(string), "/Users") {
				t.Errorf("socket error event %v", ev)
			}
			break
		}
	}
	a = ts.recsAccess(t, recs, "WS /v1/responses response.create", 1)
	if a["level"] != "ERROR" || !strings.Contains(a["error"].(string), errShard.Path) {
		t.Errorf("socket response's access record %v", a)
	}
	if !errors.Is(errShard, io.ErrUnexpectedEOF) {
		t.Fatal("errShard")
	}
}

func (ts *testServer) recsAccess(t *testing.T, recs *logRecords, endpoint string, n int) map[string]any {
	t.Helper()
	return recs.access(endpoint, n)
}

// TestRemoteErrorsLogged: a remote engine's failure answered by the front
// (a gateway error) is logged once with its cause, at level Warn, and is
// not the local engine's: /health stays ok.
func TestRemoteErrorsLogged(t *testing.T) {
	recs := newLogRecords()
	ts, _ := newStandinFront(t, standin.Options{}, Config{Logger: slog.New(recs)}, remote.Config{})
	status, body, _ := ts.do(t, "POST", "/v1/chat/completions", userChat("[[status 500]]", nil))
	if status != http.StatusBadGateway {
		t.Fatalf("%d %v", status, body)
	}
	a := recs.access("POST /v1/chat/completions", 1)
	if a["level"] != "WARN" || a["status"] != int64(502) || !strings.Contains(a["error"].(string), "stand-in error 500") {
		t.Errorf("access record %v", a)
	}
	if status, body, _ := ts.do(t, "GET", "/health", nil); status != 200 || body["status"] != "ok" {
		t.Errorf("/health: %d %v", status, body)
	}
}

// TestAccessRecord: one access record per request, saying who asked what
// and what it cost, never the prompt's or the reply's text.
func TestAccessRecord(t *testing.T) {
	recs := newLogRecords()
	ts := newTestServer(t, serverOpts{cfg: Config{Logger: slog.New(recs)}})
	status, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(nil), "User-Agent", "OpenAI/Go 1.12.0")
	if status != 200 {
		t.Fatalf("%d %v", status, body)
	}
	a := recs.access("POST /v1/chat/completions", 1)
	if a["level"] != "INFO" || a["status"] != int64(200) || a["model"] != "glm52-mini" || a["user_agent"] != "OpenAI/Go 1.12.0" ||
		a["prompt_tokens"] != int64(jpath(body, "usage", "prompt_tokens").(float64)) ||
		a["completion_tokens"] != int64(jpath(body, "usage", "completion_tokens").(float64)) ||
		a["finish"] != jpath(body, "choices", 0, "finish_reason") || !strings.HasPrefix(a["client"].(string), "127.0.0.1:") || a["duration"] == nil {
		t.Errorf("access record %v", a)
	}
	if status, _, _ := ts.do(t, "POST", "/v1/embeddings", map[string]any{"input": "hello"}); status != 200 {
		t.Fatalf("embeddings: %d", status)
	}
	if a := recs.access("POST /v1/embeddings", 1); a["prompt_tokens"] == nil || a["completion_tokens"] != int64(0) {
		t.Errorf("embeddings' access record %v", a)
	}
	ts.do(t, "GET", "/health", nil)
	if a := recs.access("GET /health", 1); a["level"] != "DEBUG" {
		t.Errorf("/health's access record %v", a)
	}
	for _, r := range recs.all() {
		for _, v := range recordAttrs(r) {
			if s, ok := v.(string); ok && strings.Contains(s, question) {
				t.Errorf("the prompt in the log: %v", recordAttrs(r))
			}
		}
	}
}
