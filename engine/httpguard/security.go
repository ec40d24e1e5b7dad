package httpguard

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/spoolhq/spool/engine/apiwire"
)

// DefaultOrigins are the browser origins allowed without configuration:
// loopback pages on any port and the desktop shell (Wails) webview.
var DefaultOrigins = []string{
	"http://localhost:*", "https://localhost:*",
	"http://127.0.0.1:*", "https://127.0.0.1:*",
	"http://[::1]:*", "https://[::1]:*",
	"wails://wails", "wails://wails.localhost:*",
	"http://wails.localhost", "http://wails.localhost:*",
}

// isLoopbackHost reports whether host (a name or IP, no port) is local.
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// hostAllowed is the DNS-rebinding guard: on a loopback listener, the Host
// header must name a loopback host or one configured.
func (s *Guard) hostAllowed(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(strings.ToLower(host), "[]")
	if host == "" {
		return false
	}
	if isLoopbackHost(host) || slices.Contains(s.allowedHosts, host) {
		return true
	}
	// A listener on a non-loopback address requires an API key; any host
	// may then reach it unless hosts were configured.
	return !s.loopbackBind && len(s.cfg.AllowedHosts) == 0
}

// originAllowed matches origin against the patterns: exact, or
// "scheme://host:*" for any port of that host (or no port).
func originAllowed(origin string, patterns []string) bool {
	if origin == "" {
		return false
	}
	origin = strings.ToLower(strings.TrimSuffix(origin, "/"))
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSuffix(p, "/"))
		switch {
		case p == "*", p == origin:
			return true
		case strings.HasSuffix(p, ":*"):
			base := strings.TrimSuffix(p, ":*")
			if origin == base {
				return true
			}
			if rest, ok := strings.CutPrefix(origin, base+":"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
				return true
			}
		}
	}
	return false
}

// authorized checks the API key (constant time) when one is configured.
func (s *Guard) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	key := r.Header.Get("x-api-key")
	if auth := r.Header.Get("Authorization"); key == "" && auth != "" {
		if scheme, rest, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "Bearer") {
			key = strings.TrimSpace(rest)
		}
	}
	if key == "" && r.URL.Path == s.cfg.EventsPath {
		// Browsers cannot set headers on a websocket handshake.
		key = r.URL.Query().Get("api_key")
	}
	return subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}

// guard applies, in order: the host check, CORS (answering preflights),
// the API key (except for public paths), and the body size limit.
func (s *Guard) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !s.hostAllowed(r) {
			s.writeError(w, r, apiwire.Forbidden("host %q is not allowed (DNS-rebinding guard); add it with --allowed-host", r.Host))
			return
		}
		origin := r.Header.Get("Origin")
		if origin != "" {
			if !originAllowed(origin, s.origins) {
				s.writeError(w, r, apiwire.Forbidden("origin %q is not allowed; add it with --cors-origin", origin))
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", "Retry-After, X-Request-Id")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				allow := r.Header.Get("Access-Control-Request-Headers")
				if allow == "" {
					allow = "Authorization, Content-Type, X-Api-Key"
				}
				h.Set("Access-Control-Allow-Headers", allow)
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if r.Method == http.MethodOptions {
			w.Header().Set("Allow", "GET, POST, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.URL.Path != "/health" && !s.authorized(r) {
			s.writeError(w, r, unauthorized())
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		}
		// The body is read before a parse slot is taken (a slow upload
		// must not hold one; bodies in memory are bounded by the
		// connection cap times MaxBodyBytes), then pre-scanned.
		held := s.holdBody(r)
		defer held()
		r, ok := s.readBody(w, r)
		if !ok {
			return
		}
		if r, ok = s.prescan(w, r); !ok {
			return
		}
		r, done, ok := s.withParseSlot(w, r, held)
		if !ok {
			return
		}
		defer done()
		next.ServeHTTP(w, r)
	})
}

// validOrigin is used by the websocket upgrader: no Origin (a non-browser
// client) or an allowed one.
func (s *Guard) validOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if _, err := url.Parse(origin); err != nil {
		return false
	}
	return originAllowed(origin, s.origins)
}
