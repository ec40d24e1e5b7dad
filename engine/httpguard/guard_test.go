package httpguard

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/apiwire"
)

// testGuard is a guard over a handler that echoes the body's length; its
// WriteError answers the refusal's status with its code in X-Code.
func testGuard(cfg Config) http.Handler {
	cfg.EventsPath = "/v1/events"
	cfg.Conversation = func(path string) (string, int, bool) {
		if path == "/v1/chat/completions" {
			return "messages", 3, true
		}
		return "", 0, false
	}
	cfg.WriteError = func(w http.ResponseWriter, r *http.Request, err error) {
		var e *apiwire.Error
		switch {
		case errors.As(err, &e):
			w.Header().Set("X-Code", e.Code)
			w.WriteHeader(e.Status)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
		io.WriteString(w, err.Error())
	}
	return New(cfg).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "ok %d", len(body))
	}))
}

// TestGuard: the guard's refusals in order (host, origin, key, body size,
// conversation length), with the code each carries, and what passes.
func TestGuard(t *testing.T) {
	h := testGuard(Config{APIKey: "k", AllowedHosts: []string{"spool.lan"}, MaxBodyBytes: 64})
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		code                     string
	}{
		{"health without key", "GET", "/health", "", nil, 200, ""},
		{"no key", "GET", "/v1/models", "", nil, 401, "invalid_api_key"},
		{"bearer key", "GET", "/v1/models", "", []string{"Authorization", "Bearer k"}, 200, ""},
		{"x-api-key", "GET", "/v1/models", "", []string{"x-api-key", "k"}, 200, ""},
		{"wrong key", "GET", "/v1/models", "", []string{"x-api-key", "j"}, 401, "invalid_api_key"},
		{"foreign host", "GET", "/health", "", []string{"Host", "evil.example"}, 403, "forbidden"},
		{"configured host", "GET", "/health", "", []string{"Host", "spool.lan:8484"}, 200, ""},
		{"foreign origin", "GET", "/health", "", []string{"Origin", "https://evil.example"}, 403, "forbidden"},
		{"loopback origin", "GET", "/health", "", []string{"Origin", "http://localhost:5173"}, 200, ""},
		{"body too large", "POST", "/v1/completions", strings.Repeat("x", 65), []string{"x-api-key", "k"}, 413, "request_too_large"},
		{"conversation fits", "POST", "/v1/chat/completions", `{"messages":[1,2,3]}`, []string{"x-api-key", "k"}, 200, ""},
		{"conversation too long", "POST", "/v1/chat/completions", `{"messages":[1,2,3,4]}`, []string{"x-api-key", "k"}, 400, "context_length_exceeded"},
		{"no conversation path", "POST", "/v1/completions", `{"messages":[1,2,3,4]}`, []string{"x-api-key", "k"}, 200, ""},
		{"events key in query", "GET", "/v1/events?api_key=k", "", nil, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			r := httptest.NewRequest(tc.method, "http://127.0.0.1:8484"+tc.path, body)
			for i := 0; i < len(tc.header); i += 2 {
				if tc.header[i] == "Host" {
					r.Host = tc.header[i+1]
				} else {
					r.Header.Set(tc.header[i], tc.header[i+1])
				}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status || w.Header().Get("X-Code") != tc.code {
				t.Errorf("%d %q (%s), want %d %q", w.Code, w.Header().Get("X-Code"), w.Body.String(), tc.status, tc.code)
			}
			if tc.status == 200 && w.Body.String() != fmt.Sprintf("ok %d", len(tc.body)) {
				t.Errorf("the handler saw %q, want the whole body of %d bytes", w.Body.String(), len(tc.body))
			}
		})
	}
}

// TestPreflight: a CORS preflight from an allowed origin is answered by the
// guard, without the key, and never reaches the handler.
func TestPreflight(t *testing.T) {
	h := testGuard(Config{APIKey: "k"})
	r := httptest.NewRequest("OPTIONS", "http://127.0.0.1/v1/chat/completions", nil)
	r.Header.Set("Origin", "wails://wails")
	r.Header.Set("Access-Control-Request-Method", "POST")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Origin") != "wails://wails" || w.Body.Len() != 0 {
		t.Errorf("preflight: %d %v %q", w.Code, w.Header(), w.Body.String())
	}
}

func TestCheckBind(t *testing.T) {
	for _, tc := range []struct {
		host, key string
		ok        bool
	}{
		{"127.0.0.1", "", true}, {"localhost", "", true}, {"::1", "", true}, {"", "", true},
		{"0.0.0.0", "", false}, {"0.0.0.0", "k", true}, {"192.168.1.2", "", false},
	} {
		if err := CheckBind(tc.host, tc.key); (err == nil) != tc.ok {
			t.Errorf("CheckBind(%q, %q) = %v", tc.host, tc.key, err)
		}
	}
}
