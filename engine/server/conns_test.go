package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/httpguard"
)

// serveReal runs srv.Serve on a loopback listener (the connection guard is
// part of Serve, not of the handler) and returns its address.
func serveReal(t *testing.T, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String()
}

// rawRequest writes a request on a new connection and reads the response.
func rawRequest(t *testing.T, addr, req string) (*http.Response, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", strings.SplitN(req, "\r\n", 2)[0], err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, c
}

// idleKeepAlives opens n connections that each finish one request and stay
// open as idle keep-alives.
func idleKeepAlives(t *testing.T, addr string, n int) {
	t.Helper()
	for i := range n {
		resp, _ := rawRequest(t, addr, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("keep-alive %d: status %d", i, resp.StatusCode)
		}
	}
}

// stalled opens n connections that send part of a request's headers and
// then nothing (slowloris).
func stalled(t *testing.T, addr string, n int) {
	t.Helper()
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	}
}

// healthAnswers asks GET /health on tries fresh connections; each must
// answer 200.
func healthAnswers(t *testing.T, addr string, tries int) {
	t.Helper()
	for i := range tries {
		resp, c := rawRequest(t, addr, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		c.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/health %d: status %d", i, resp.StatusCode)
		}
	}
}

// TestProbeHealthWithIdleKeepAlives is the probe: with 64 idle
// keep-alives open (the default cap), /health answers on fresh
// connections, and an API request gets a full connection (an idle
// keep-alive is closed for it) rather than 503.
//
//	flock /tmp/spool-heavy.lock go test ./engine/server -run TestProbeHealthWithIdleKeepAlives -count=1 -v
func TestProbeHealthWithIdleKeepAlives(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true})
	addr := serveReal(t, ts.srv)
	idleKeepAlives(t, addr, 64)
	resp, _ := rawRequest(t, addr, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
	if resp.StatusCode == http.StatusServiceUnavailable {
		t.Fatalf("an API request got 503 while idle keep-alives held the cap")
	}
	healthAnswers(t, addr, 10)
}

func TestOverCapacityAnswers503(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true, cfg: Config{MaxConnections: 4}})
	addr := serveReal(t, ts.srv)
	// Four stalled readers fill the cap: they are not idle, so nothing can
	// be closed to make room.
	stalled(t, addr, 4)
	waitOpen(t, ts.srv, 4)

	resp, _ := rawRequest(t, addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over capacity: status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	healthAnswers(t, addr, 3)
	resp, _ = rawRequest(t, addr, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("the UI root over capacity: status %d", resp.StatusCode)
	}

	// Past the overflow headroom too, a connection gets a bare 503.
	stalled(t, addr, httpguard.OverflowConnections)
	waitOpen(t, ts.srv, 4+httpguard.OverflowConnections)
	resp, _ = rawRequest(t, addr, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !resp.Close {
		t.Fatalf("past every limit: status %d, Retry-After %q, close %v", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close)
	}
}

func TestIdleKeepAlivesMakeRoom(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true, cfg: Config{MaxConnections: 4}})
	addr := serveReal(t, ts.srv)
	idleKeepAlives(t, addr, 4)
	// A new client gets a full connection (not an overflow one): an idle
	// keep-alive was closed for it.
	resp, _ := rawRequest(t, addr, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}")
	if resp.StatusCode == http.StatusServiceUnavailable {
		t.Fatalf("a new client got 503 while idle keep-alives held the cap")
	}
}

// waitOpen waits until the server tracks n connections.
func waitOpen(t *testing.T, srv *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if srv.guard.OpenConnections() >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the server never held %d connections", n)
}

func TestConflictingFramingClosesTheConnection(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true})
	addr := serveReal(t, ts.srv)
	body := "2\r\n{}\r\n0\r\n\r\n"
	req := fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s", len(body), body)
	resp, c := rawRequest(t, addr, req)
	if resp.StatusCode != http.StatusBadRequest || !resp.Close {
		t.Fatalf("Content-Length with Transfer-Encoding: status %d, close %v; want 400 and close", resp.StatusCode, resp.Close)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || n > 0 {
		t.Fatalf("the connection stayed open")
	}
	// An ordinary chunked request is served.
	resp, _ = rawRequest(t, addr, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"+body)
	if resp.StatusCode == http.StatusBadRequest && resp.Close {
		t.Fatalf("a plain chunked request was refused as conflicting")
	}
}

func TestEventsWithoutUpgradeAnswersJSON(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true})
	status, body, header := ts.do(t, "GET", eventsPath, nil)
	if status != http.StatusUpgradeRequired || header.Get("Content-Type") != "application/json" {
		t.Fatalf("plain GET %s: status %d, type %q", eventsPath, status, header.Get("Content-Type"))
	}
	if msg, _ := jpath(body, "error", "message").(string); !strings.Contains(msg, "websocket") {
		t.Fatalf("the error does not say to use a websocket: %v", body)
	}
}
