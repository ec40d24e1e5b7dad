package server

import (
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/spoolhq/spool/engine/access"
)

// uiTestServer is a Server with only what WithUI touches: a stub API
// handler behind the guard, and an API key.
func uiTestServer(t *testing.T) *Server {
	t.Helper()
	cfg := Config{APIKey: "k", Logger: slog.New(slog.DiscardHandler)}.withDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, health: &access.Health{}}
	s.guard = s.newGuard()
	s.handler = s.guard.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "api "+r.URL.Path)
	}))
	s.WithUI(UI{
		Assets: fstest.MapFS{
			"index.html":        {Data: []byte("<!doctype html>spool")},
			"assets/app-abc.js": {Data: []byte("console.log(1)")},
			"assets":            {Mode: fs.ModeDir | 0o755},
		},
		API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ui "+r.Method+" "+r.URL.Path)
		}),
	})
	return s
}

func TestWithUI(t *testing.T) {
	s := uiTestServer(t)
	tests := []struct {
		name, method, path, host, key string
		status                        int
		body, cache                   string
	}{
		{"index without key", "GET", "/", "127.0.0.1:8484", "", 200, "spool", "no-cache"},
		{"hashed asset", "GET", "/assets/app-abc.js", "localhost:8484", "", 200, "console.log", "immutable"},
		{"head index", "HEAD", "/", "127.0.0.1", "", 200, "", "no-cache"},
		{"index.html redirects to /", "GET", "/index.html", "127.0.0.1", "", 301, "", "no-cache"},
		{"directory falls through", "GET", "/assets/", "127.0.0.1", "k", 200, "api /assets/", ""},
		{"api needs key", "GET", "/stats", "127.0.0.1", "", 401, "", ""},
		{"api with key", "GET", "/stats", "127.0.0.1", "k", 200, "api /stats", ""},
		{"ui api needs key", "GET", "/ui/plan", "127.0.0.1", "", 401, "", ""},
		{"ui api with key", "POST", "/ui/download/start", "127.0.0.1", "k", 200, "ui POST /ui/download/start", ""},
		{"rebinding guard on assets", "GET", "/", "evil.example:8484", "", 403, "", ""},
		{"post to an asset is the API's", "POST", "/index.html", "127.0.0.1", "k", 200, "api /index.html", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			r.Host = tc.host
			if tc.key != "" {
				r.Header.Set("Authorization", "Bearer "+tc.key)
			}
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d (%s)", w.Code, tc.status, w.Body)
			}
			if !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("body %q, want it to contain %q", w.Body, tc.body)
			}
			if got := w.Header().Get("Cache-Control"); !strings.Contains(got, tc.cache) {
				t.Errorf("Cache-Control %q, want %q", got, tc.cache)
			}
		})
	}
}
