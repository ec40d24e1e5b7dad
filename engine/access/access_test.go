package access

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/spoolhq/spool/engine/apiwire"
)

// records keeps the records logged.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	return nil
}

func attrs(rec slog.Record) map[string]string {
	out := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool {
		out[a.Key] = a.Value.Resolve().String()
		return true
	})
	return out
}

// TestHandler: each request gets one record, at the level its answer
// says; a server error's cause is in it once, an internal one degrades
// the health, client errors and a client that left do neither.
func TestHandler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request)
		level  slog.Level
		status string
		cause  string
		health bool
	}{
		{"ok", func(w http.ResponseWriter, r *http.Request) {
			From(r.Context()).SetTokens("m", 3, 2, "stop")
			w.Write([]byte("x"))
		}, slog.LevelInfo, "200", "", true},
		{"bad request", func(w http.ResponseWriter, r *http.Request) {
			e := Fail(r.Context(), apiwire.Invalid("x", "bad"))
			apiwire.WriteError(w, r.URL.Path, e)
		}, slog.LevelInfo, "400", "", true},
		{"client left", func(w http.ResponseWriter, r *http.Request) {
			Fail(r.Context(), apiwire.ClientClosed(context.Canceled))
		}, slog.LevelInfo, "200", "", true},
		{"unavailable", func(w http.ResponseWriter, r *http.Request) {
			apiwire.WriteError(w, r.URL.Path, Fail(r.Context(), apiwire.ShuttingDown()))
		}, slog.LevelWarn, "503", "the server is shutting down; retry once it is back", true},
		{"internal", func(w http.ResponseWriter, r *http.Request) {
			e := Fail(r.Context(), apiwire.Internal(errors.New("open /home/x: denied")))
			Fail(r.Context(), apiwire.Internal(errors.New("second"))) // the first cause stays
			apiwire.WriteError(w, r.URL.Path, e)
		}, slog.LevelError, "500", "open /home/x: denied", false},
		{"quiet", func(w http.ResponseWriter, r *http.Request) { From(r.Context()).SetQuiet() }, slog.LevelDebug, "200", "", true},
	} {
		var recs records
		h := &Health{}
		srv := Handler(slog.New(&recs), h, http.HandlerFunc(tc.handle))
		srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/x", nil))
		if len(recs.recs) != 1 {
			t.Fatalf("%s: %d records", tc.name, len(recs.recs))
		}
		rec := recs.recs[0]
		a := attrs(rec)
		if rec.Message != Message || rec.Level != tc.level || a["status"] != tc.status || a["error"] != tc.cause || a["endpoint"] != "POST /v1/x" {
			t.Errorf("%s: %s %s %v", tc.name, rec.Level, rec.Message, a)
		}
		if _, ok := h.Report(); ok != tc.health {
			t.Errorf("%s: healthy %v, want %v", tc.name, ok, tc.health)
		}
	}
}

// TestHealth: the report says what the latest internal error's client was
// told, and how many there were.
func TestHealth(t *testing.T) {
	var h Health
	if rep, ok := h.Report(); !ok || rep.Status != "ok" || rep.Since != nil {
		t.Fatalf("new: %+v %v", rep, ok)
	}
	h.Degrade("first")
	h.Degrade("second")
	if rep, ok := h.Report(); ok || rep.Status != "degraded" || rep.Error != "second" || rep.Errors != 2 || rep.Since.After(*rep.Latest) {
		t.Errorf("degraded: %+v %v", rep, ok)
	}
}

// TestNil: a request outside Handler has no record, and notes in it are
// dropped.
func TestNil(t *testing.T) {
	rec := From(context.Background())
	rec.SetEndpoint("x")
	rec.SetQuiet()
	rec.SetTokens("m", 1, 1, "stop")
	if e := Fail(context.Background(), apiwire.Internal(errors.New("x"))); e.Status != 500 {
		t.Errorf("Fail returned %+v", e)
	}
}
