package server

import (
	"net/http"
	"strings"
	"testing"
)

func TestAuth(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{APIKey: "sekret"}})
	ts.key = "" // send keys by hand
	if status, _, _ := ts.do(t, "GET", "/health", nil); status != 200 {
		t.Errorf("/health without a key: %d", status)
	}
	cases := []struct {
		name   string
		header []string
		status int
	}{
		{"none", nil, 401},
		{"wrong bearer", []string{"Authorization", "Bearer nope"}, 401},
		{"prefix of key", []string{"Authorization", "Bearer sekre"}, 401},
		{"bearer", []string{"Authorization", "Bearer sekret"}, 200},
		{"bearer lower", []string{"Authorization", "bearer sekret"}, 200},
		{"x-api-key", []string{"x-api-key", "sekret"}, 200},
		{"wrong x-api-key", []string{"x-api-key", "nope"}, 401},
	}
	for _, c := range cases {
		status, body, _ := ts.do(t, "GET", "/v1/models", nil, c.header...)
		if status != c.status {
			t.Errorf("%s: status %d, want %d", c.name, status, c.status)
		}
		if status == 401 && jpath(body, "error", "code") != "invalid_api_key" {
			t.Errorf("%s: %v", c.name, body)
		}
	}
	status, body, _ := ts.do(t, "POST", "/v1/messages", map[string]any{"max_tokens": 1})
	if status != 401 || body["type"] != "error" || jpath(body, "error", "type") != "authentication_error" {
		t.Errorf("anthropic without a key: %d %v", status, body)
	}
	if status, _, _ := ts.do(t, "GET", "/stats", nil); status != 401 {
		t.Errorf("/stats without a key: %d", status)
	}
}

func TestBindNeedsKey(t *testing.T) {
	for _, c := range []struct {
		host, key string
		ok        bool
	}{
		{"127.0.0.1", "", true}, {"localhost", "", true}, {"::1", "", true},
		{"0.0.0.0", "", false}, {"192.168.1.5", "", false}, {"0.0.0.0", "k", true},
	} {
		if err := CheckBind(c.host, c.key); (err == nil) != c.ok {
			t.Errorf("CheckBind(%q, %q) = %v", c.host, c.key, err)
		}
	}
	d := loadDemo(t)
	_ = d
	ts := newTestServer(t, serverOpts{})
	if _, err := New(Config{Host: "0.0.0.0"}, ts.srv.eng); err == nil {
		t.Error("New accepted a non-loopback bind without a key")
	}
}

func TestHostGuard(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{AllowedHosts: []string{"spool.internal"}}})
	for _, c := range []struct {
		host   string
		status int
	}{
		{"127.0.0.1:8484", 200}, {"localhost", 200}, {"localhost:1", 200}, {"[::1]:8484", 200},
		{"app.localhost", 200}, {"spool.internal", 200},
		{"evil.example.com", 403}, {"evil.example.com:8484", 403}, {"127.0.0.1.evil.com", 403},
	} {
		status, body, _ := ts.do(t, "GET", "/v1/models", nil, "Host", c.host)
		if status != c.status {
			t.Errorf("Host %q: status %d, want %d (%v)", c.host, status, c.status, body)
		}
	}
}

func TestCORS(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{AllowedOrigins: []string{"https://ui.example.com"}}})
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", ts.URL+"/v1/chat/completions", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, origin := range []string{"http://localhost:5173", "http://127.0.0.1:3000", "wails://wails", "wails://wails.localhost:34115", "https://ui.example.com"} {
		resp := preflight(origin)
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "authorization") {
			t.Errorf("preflight from %s: %d %v", origin, resp.StatusCode, resp.Header)
		}
	}
	for _, origin := range []string{"https://evil.example.com", "http://localhost.evil.com", "http://localhost:80x"} {
		if resp := preflight(origin); resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s: %d", origin, resp.StatusCode)
		}
		if status, _, _ := ts.do(t, "GET", "/v1/models", nil, "Origin", origin); status != 403 {
			t.Errorf("request from %s: %d", origin, status)
		}
	}
	status, _, h := ts.do(t, "GET", "/v1/models", nil, "Origin", "http://localhost:5173")
	if status != 200 || h.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Errorf("simple request from localhost: %d %v", status, h)
	}
}
