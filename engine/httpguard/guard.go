package httpguard

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
)

// Config configures a Guard. Zero fields take the defaults (New fills in
// what MaxConnections and MaxParsing leave).
type Config struct {
	// Host is the listen host; a host that is not loopback requires
	// APIKey (see CheckBind) and is accepted as a Host header.
	Host string
	// APIKey, when set, is required on every path but /health, as
	// "Authorization: Bearer KEY" or "x-api-key: KEY" (or, on EventsPath,
	// the api_key query parameter).
	APIKey string
	// AllowedOrigins are CORS origins allowed besides DefaultOrigins
	// ("scheme://host:*" matches any port; "*" allows all).
	AllowedOrigins []string
	// AllowedHosts are Host header names accepted besides loopback ones.
	AllowedHosts []string
	// MaxBodyBytes bounds a request body (default 4 MiB).
	MaxBodyBytes int64
	// MaxConnections bounds open connections (default 64; see conns.go).
	MaxConnections int
	// MaxParsing bounds requests whose bodies are parsed at once
	// (default: the cores, 2 to 4; see limits.go).
	MaxParsing int
	// EventsPath is the websocket path: its API key may come in the
	// query, and an overflow connection may not open it.
	EventsPath string
	// Conversation, when set, names the top-level field that holds the
	// conversation of a request to path and the most entries it may have;
	// ok is false for a path that has none (see prescan.go).
	Conversation func(path string) (key string, limit int, ok bool)
	// WriteError answers a refusal in the API's error envelope: an
	// *apiwire.Error, or the context's error when the client left while
	// its request waited to be read.
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
}

// Guard is the transport hardening in front of an API handler. Create it
// with New.
type Guard struct {
	cfg          Config
	origins      []string
	allowedHosts []string
	loopbackBind bool
	parsing      *parseGate
	conns        atomic.Pointer[connGuard] // the running listener's
}

// New builds the guard of cfg. WriteError is required.
func New(cfg Config) *Guard {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 64
	}
	if cfg.MaxParsing <= 0 {
		cfg.MaxParsing = DefaultParsing()
	}
	return &Guard{
		cfg:          cfg,
		origins:      append(append([]string{}, DefaultOrigins...), cfg.AllowedOrigins...),
		allowedHosts: allowedHostsOf(cfg),
		loopbackBind: isLoopbackHost(cfg.Host),
		parsing:      newParseGate(cfg.MaxParsing),
	}
}

func (s *Guard) writeError(w http.ResponseWriter, r *http.Request, err error) {
	s.cfg.WriteError(w, r, err)
}

// Handler wraps next with the request guards (see guard in security.go).
func (s *Guard) Handler(next http.Handler) http.Handler { return s.guard(next) }

// HostAllowed is the DNS-rebinding guard, for handlers served outside
// Handler (static files).
func (s *Guard) HostAllowed(r *http.Request) bool { return s.hostAllowed(r) }

// ValidOrigin is the websocket upgrader's origin check: no Origin (a
// non-browser client) or an allowed one.
func (s *Guard) ValidOrigin(r *http.Request) bool { return s.validOrigin(r) }

// Serve sets srv up to serve through the connection guard of ln: srv's
// Handler gains the per-connection rules and its ConnState and ConnContext
// hooks are set. It returns the listener to pass to srv.Serve.
func (s *Guard) Serve(srv *http.Server, ln net.Listener) net.Listener {
	guard := newConnGuard(ln, s.cfg.MaxConnections)
	s.conns.Store(guard)
	srv.Handler = s.connAware(srv.Handler)
	srv.ConnState = guard.setState
	srv.ConnContext = connContext
	return guard
}

// OpenConnections is the number of connections the running listener
// tracks (0 before Serve).
func (s *Guard) OpenConnections() int {
	if g := s.conns.Load(); g != nil {
		return g.open()
	}
	return 0
}

// OverflowConnections is the headroom past MaxConnections kept for
// /health, the UI and 503 answers.
const OverflowConnections = overflowConns

// EndParsing releases the parse slot of the request of ctx: its prompt is
// ready (or it is answered), so its body is garbage.
func EndParsing(ctx context.Context) { endParsing(ctx) }

// DefaultParsing is the default of MaxParsing.
func DefaultParsing() int { return defaultParsing() }

// allowedHostsOf lists the Host header names accepted besides loopback
// ones: the configured ones and the listen address's.
func allowedHostsOf(cfg Config) []string {
	var out []string
	for _, h := range cfg.AllowedHosts {
		out = append(out, strings.Trim(strings.ToLower(h), "[]"))
	}
	if h := strings.Trim(strings.ToLower(cfg.Host), "[]"); h != "" && !isUnspecified(h) {
		out = append(out, h)
	}
	return out
}

// CheckBind refuses a non-loopback listen address without an API key.
func CheckBind(host, apiKey string) error {
	if host == "" || isLoopbackHost(host) || apiKey != "" {
		return nil
	}
	return fmt.Errorf("server: refusing to listen on %s without an API key: pass --api-key (or bind 127.0.0.1)", host)
}

func isUnspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// Admit applies to a request that did not come through Handler (a
// WebSocket frame carried as a POST of body) the limits a POST meets once
// its body is read: the conversation pre-scan and a parse slot. done
// releases the slot; when ok is false the refusal was written to w.
func (s *Guard) Admit(w http.ResponseWriter, r *http.Request, body []byte) (_ *http.Request, done func(), ok bool) {
	r.Body = bufferedBody{Reader: bytes.NewReader(body), data: body}
	r.ContentLength = int64(len(body))
	if r, ok = s.prescan(w, r); !ok {
		return nil, nil, false
	}
	return s.withParseSlot(w, r, func() {})
}
