package remote

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "http://gpu:8000", want: "http://gpu:8000"},
		{in: "http://gpu:8000/", want: "http://gpu:8000"},
		{in: "http://gpu:8000/v1", want: "http://gpu:8000"},
		{in: " https://llm.example.com/vllm/v1/ ", want: "https://llm.example.com/vllm"},
		{in: "http://[::1]:30000", want: "http://[::1]:30000"},
		{in: "", err: "empty"},
		{in: "gpu:8000", err: "must start with http:// or https://"},
		{in: "ftp://gpu", err: "http:// or https://"},
		{in: "http://", err: "no host"},
		{in: "http://user:secret@gpu:8000", err: "user or password"},
		{in: "http://gpu:8000/?api_key=secret", err: "query"},
		{in: "http://gpu:8000/#x", err: "fragment"},
		{in: "http://gpu:99999999", err: "port"},
	} {
		u, err := ParseURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseURL(%q) = %v, %v; want an error with %q", tc.in, u, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("ParseURL(%q) echoes the secret: %v", tc.in, err)
			}
			continue
		}
		if err != nil || u.String() != tc.want {
			t.Errorf("ParseURL(%q) = %v, %v; want %s", tc.in, u, err, tc.want)
		}
	}
}

func newTestClient(t *testing.T, h http.Handler, cfg Config) (*Client, *httptest.Server) {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	cfg.URL = ts.URL + "/v1"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, ts
}

func TestDoSendsKeyAndPaths(t *testing.T) {
	var got *http.Request
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		w.Write([]byte(`{}`))
	}), Config{Key: "remote-secret-key"})
	resp, err := c.Do(context.Background(), http.MethodPost, "/v1/chat/completions", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.URL.Path != "/v1/chat/completions" || got.Header.Get("Authorization") != "Bearer remote-secret-key" || got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request %s %v", got.URL.Path, got.Header)
	}
	if strings.Contains(c.Endpoint(), "secret") {
		t.Fatal(c.Endpoint())
	}
}

func TestDoErrors(t *testing.T) {
	const key = "remote-secret-key"
	mux := http.NewServeMux()
	mux.HandleFunc("/vllm400", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		w.Write([]byte(`{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":"max_tokens","code":400}`))
	})
	mux.HandleFunc("/unauthorized", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		w.Write([]byte(`{"error":"Unauthorized"}`))
	})
	mux.HandleFunc("/echo-key", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		w.Write([]byte(`{"error":{"message":"bad header ` + r.Header.Get("Authorization") + `","type":"server_error"}}`))
	})
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(503)
		w.Write([]byte("<html><body>Service Unavailable</body></html>"))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.example/v1/x?token=abc", http.StatusFound)
	})
	c, _ := newTestClient(t, mux, Config{Key: key})
	for _, tc := range []struct {
		path   string
		kind   Kind
		status int
		typ    string
		param  string
		msg    string
		retry  int
	}{
		{"/vllm400", KindStatus, 400, "invalid_request_error", "max_tokens", "max_tokens is too large", 0},
		{"/unauthorized", KindAuth, 401, "authentication_error", "", "refused Spool's remote key", 0},
		{"/echo-key", KindStatus, 500, "server_error", "", "bad header Bearer [remote key]", 0},
		{"/busy", KindStatus, 503, "server_error", "", "Service Unavailable", 7},
		{"/redirect", KindProtocol, 0, "", "", "redirected /redirect to https://elsewhere.example/v1/x", 0},
	} {
		_, err := c.Do(context.Background(), http.MethodGet, tc.path, nil)
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: %v is not an *Error", tc.path, err)
		}
		if e.Kind != tc.kind || e.Status != tc.status || e.Type != tc.typ || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) || e.RetryAfterSeconds() != tc.retry {
			t.Errorf("%s: %+v", tc.path, e)
		}
		if strings.Contains(e.Error(), key) || strings.Contains(e.Error(), "token=abc") {
			t.Errorf("%s: the error leaks a secret: %v", tc.path, e)
		}
	}
}

func TestDoUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := New(Config{URL: "http://" + addr, Key: "remote-secret-key"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(context.Background(), http.MethodGet, "/v1/models", nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindUnreachable || !strings.Contains(e.Message, "not reachable") {
		t.Fatalf("%v", err)
	}
	if st := c.Status(); st.Reachable || st.Error == "" {
		t.Fatalf("status %+v", st)
	}
}

func TestTimeouts(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {\"a\":1}\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c, _ := newTestClient(t, mux, Config{Timeout: 150 * time.Millisecond})
	_, err := c.Do(context.Background(), http.MethodGet, "/slow", nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindTimeout {
		t.Fatalf("slow answer: %v", err)
	}
	resp, err := c.Do(context.Background(), http.MethodGet, "/stall", nil)
	if err != nil {
		t.Fatal(err)
	}
	st := c.Stream(resp)
	defer st.Close()
	var n int
	for range st.Events() {
		n++
	}
	if n != 1 || !errors.As(st.Err(), &e) || e.Kind != KindTimeout || !strings.Contains(e.Message, "sent nothing for 150ms") {
		t.Fatalf("stalled stream: %d events, %v", n, st.Err())
	}
}

func TestCallerCancelIsNotAnError(t *testing.T) {
	started := make(chan struct{})
	gone := make(chan struct{})
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		close(gone)
	}), Config{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, err := c.Do(ctx, http.MethodGet, "/x", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the remote never saw the request end")
	}
	if st := c.Status(); st.Error != "" {
		t.Fatalf("a cancellation marked the remote: %+v", st)
	}
}

func TestStreamCloseEndsTheRemoteRequest(t *testing.T) {
	gone := make(chan struct{})
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			if _, err := io.WriteString(w, "data: {}\n\n"); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(gone)
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		close(gone)
	}), Config{})
	resp, err := c.Do(context.Background(), http.MethodGet, "/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	st := c.Stream(resp)
	<-st.Events()
	st.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("closing the stream did not end the remote's request")
	}
}
