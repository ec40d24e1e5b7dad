package httpguard

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
)

// The connection cap never leaves a client waiting in the listen backlog:
// every connection is accepted at once. Past MaxConnections, idle
// keep-alives (and connections that have sent nothing for a while) are
// closed to make room; when that is not enough the connection is served as
// an overflow connection, which answers /health, the UI and other GETs but
// refuses API work with 503 and Retry-After; past MaxConnections plus
// overflowConns the connection gets a bare 503 and is closed.

// overflowConns is the headroom past MaxConnections kept for /health, the
// UI and 503 answers.
const overflowConns = 16

// silentAfter is how long a connection may stay silent (no request yet)
// before it counts as idle under pressure.
const silentAfter = 2 * time.Second

// connGuard wraps a listener with the connection accounting.
type connGuard struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[*guardedConn]struct{}
	// rejecting bounds the goroutines answering bare 503s.
	rejecting chan struct{}
}

func newConnGuard(ln net.Listener, max int) *connGuard {
	return &connGuard{Listener: ln, max: max, conns: map[*guardedConn]struct{}{}, rejecting: make(chan struct{}, 64)}
}

// guardedConn is one accepted connection.
type guardedConn struct {
	net.Conn
	g        *connGuard
	overflow bool
	once     sync.Once

	// Guarded by g.mu.
	state http.ConnState
	since time.Time

	// framing watches request headers for Content-Length together with
	// Transfer-Encoding.
	framing framingScan
}

func (c *guardedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.framing.scan(p[:n])
	return n, err
}

func (c *guardedConn) Close() error {
	c.once.Do(func() {
		c.g.mu.Lock()
		delete(c.g.conns, c)
		c.g.mu.Unlock()
	})
	return c.Conn.Close()
}

// Accept accepts the next connection, making room or refusing as above.
func (g *connGuard) Accept() (net.Conn, error) {
	for {
		nc, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		if len(g.conns) >= g.max {
			g.closeIdleLocked(len(g.conns) - g.max + 1)
		}
		n := len(g.conns)
		if n >= g.max+overflowConns {
			g.mu.Unlock()
			g.reject(nc)
			continue
		}
		c := &guardedConn{Conn: nc, g: g, overflow: n >= g.max, state: http.StateNew, since: time.Now()}
		g.conns[c] = struct{}{}
		g.mu.Unlock()
		return c, nil
	}
}

// closeIdleLocked closes up to n idle keep-alives and silent connections,
// the longest idle first. Call with g.mu held.
func (g *connGuard) closeIdleLocked(n int) {
	now := time.Now()
	var idle []*guardedConn
	for c := range g.conns {
		if c.state == http.StateIdle || c.state == http.StateNew && now.Sub(c.since) > silentAfter {
			idle = append(idle, c)
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].since.Before(idle[j].since) })
	for _, c := range idle[:min(n, len(idle))] {
		delete(g.conns, c)
		go c.Close()
	}
}

// setState is the http.Server's ConnState hook. A hijacked connection
// (an events websocket, with its own cap) leaves the count: it is no
// longer the API's.
func (g *connGuard) setState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*guardedConn)
	if !ok {
		return
	}
	g.mu.Lock()
	c.state, c.since = state, time.Now()
	if state == http.StateHijacked {
		delete(g.conns, c)
	}
	g.mu.Unlock()
}

// open is the number of tracked connections.
func (g *connGuard) open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// bareBusy is the answer of a connection past every limit.
var bareBusy = func() []byte {
	body := `{"error":{"message":"the server has too many open connections; retry shortly","type":"server_error","param":null,"code":"too_many_connections"}}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// reject answers a bare 503 and closes the connection. It reads what the
// client sent first (briefly), so that closing does not reset the
// connection before the client reads the answer.
func (g *connGuard) reject(nc net.Conn) {
	select {
	case g.rejecting <- struct{}{}:
	default:
		nc.Close()
		return
	}
	go func() {
		defer func() { <-g.rejecting }()
		defer nc.Close()
		buf := make([]byte, 4096)
		nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		nc.Read(buf)
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := nc.Write(bareBusy); err != nil {
			return
		}
		if tc, ok := nc.(interface{ CloseWrite() error }); ok {
			tc.CloseWrite()
		}
		nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		for {
			if _, err := nc.Read(buf); err != nil {
				return
			}
		}
	}()
}

type connKey struct{}

// connContext is the http.Server's ConnContext hook.
func connContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*guardedConn); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// connAware applies the per-connection rules before the handler: a request
// framed with both Content-Length and Transfer-Encoding is refused and its
// connection closed, and an overflow connection serves only GETs other than
// the websocket.
func (s *Guard) connAware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(*guardedConn)
		if c == nil {
			next.ServeHTTP(w, r)
			return
		}
		if c.framing.conflicted() {
			w.Header().Set("Connection", "close")
			s.writeError(w, r, apiwire.Invalid("", "the request has both Content-Length and Transfer-Encoding headers; send one (the connection is closed)"))
			return
		}
		if c.overflow {
			w.Header().Set("Connection", "close")
			get := r.Method == http.MethodGet || r.Method == http.MethodHead
			if !get || r.URL.Path == s.cfg.EventsPath {
				s.writeError(w, r, tooManyConnections())
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// framingScan looks for header blocks that hold both a Content-Length and a
// Transfer-Encoding line. It sees every byte read from the connection,
// bodies included, one read at a time (a header line split across two
// reads is not seen; Go's server then lets Transfer-Encoding win, which is
// safe for Spool itself). A body that looks like such headers only costs
// its connection: closing is always safe.
type framingScan struct {
	// mu: the server reads the connection from its serving goroutine and,
	// while a handler runs, from a background reader.
	mu       sync.Mutex
	cl, te   bool // seen in the current header block
	conflict bool // a header block with both ended
}

var (
	clHeader = []byte("\ncontent-length:")
	teHeader = []byte("\ntransfer-encoding:")
)

func (f *framingScan) scan(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := bytes.IndexByte(p, '\n'); i >= 0; {
		line := p[i:]
		f.cl = f.cl || hasPrefixFold(line, clHeader)
		f.te = f.te || hasPrefixFold(line, teHeader)
		if i >= 3 && p[i-1] == '\r' && p[i-2] == '\n' && p[i-3] == '\r' {
			// The blank line that ends a header block.
			f.conflict = f.conflict || f.cl && f.te
			f.cl, f.te = false, false
		}
		next := bytes.IndexByte(p[i+1:], '\n')
		if next < 0 {
			return
		}
		i += 1 + next
	}
}

// conflicted reports, once, that a header block had both headers.
func (f *framingScan) conflicted() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.conflict
	f.conflict = false
	return c
}

func hasPrefixFold(s, prefix []byte) bool {
	return len(s) >= len(prefix) && bytes.EqualFold(s[:len(prefix)], prefix)
}
