package hub

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultEndpoint is the hub used when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Client talks to one hub endpoint. The zero value is not usable; set at
// least Endpoint.
type Client struct {
	// Endpoint is the hub's base URL without a trailing slash, for example
	// https://huggingface.co.
	Endpoint string
	// Token, if not empty, is sent as "Authorization: Bearer <token>" on
	// requests to the endpoint's own scheme, host and port only, whatever
	// the request (API pages, resolve URLs, redirects, pagination links):
	// the CDN, another host or another port of the same host never sees it.
	Token string
	// HTTP is the client used for every request; nil means
	// http.DefaultClient. Its Timeout should be zero: downloads are long and
	// callers bound them with contexts.
	HTTP *http.Client
	// UserAgent is sent on every request when not empty.
	UserAgent string
}

// NewClient returns a client for the endpoint and token of env, with a
// transport that keeps enough idle connections for parallel range requests.
func NewClient(env Env) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = 2 * time.Minute
	return &Client{Endpoint: env.Endpoint, Token: env.Token, UserAgent: "spool", HTTP: &http.Client{Transport: tr}}
}

// maxRedirects bounds the redirects of one request.
const maxRedirects = 10

// ErrRedirectLoop is wrapped by the error of a request that was redirected
// more than maxRedirects times. It is final: retrying loops again.
var ErrRedirectLoop = errors.New("too many redirects (a redirect loop?)")

// httpClient is the configured client with the credential rule and the
// redirect bound applied to every request it makes.
func (c *Client) httpClient() *http.Client {
	base := c.HTTP
	if base == nil {
		base = http.DefaultClient
	}
	hc := *base
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc.Transport = &credentials{base: rt, origin: origin(c.endpoint()), token: c.Token}
	next := base.CheckRedirect
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("%w: %d redirects, the last to %s", ErrRedirectLoop, len(via), req.URL.Redacted())
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &hc
}

// credentials adds the token to requests for the endpoint's origin and
// removes any Authorization header from requests elsewhere.
type credentials struct {
	base   http.RoundTripper
	origin string
	token  string
}

func (t *credentials) RoundTrip(req *http.Request) (*http.Response, error) {
	own := t.token != "" && origin(req.URL.String()) == t.origin
	if own == (req.Header.Get("Authorization") != "") {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	if own {
		req.Header.Set("Authorization", "Bearer "+t.token)
	} else {
		req.Header.Del("Authorization")
	}
	return t.base.RoundTrip(req)
}

// origin is scheme://host:port of a URL, with the scheme's default port
// made explicit, or "" when it does not parse.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

func (c *Client) endpoint() string { return strings.TrimRight(c.Endpoint, "/") }

// newRequest builds a request with the client's headers.
func (c *Client) newRequest(method, rawURL string) (*http.Request, error) {
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("hub: bad URL %q: %w", rawURL, err)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	return req, nil
}

// ValidateRepoID checks that id looks like a Hub model id: "name" or
// "owner/name", made of letters, digits, '-', '_' and '.', with no "..".
func ValidateRepoID(id string) error {
	parts := strings.Split(id, "/")
	if len(parts) > 2 || id == "" {
		return fmt.Errorf("hub: repository id %q: want owner/name", id)
	}
	for _, p := range parts {
		if p == "" || p == "." || strings.Contains(p, "..") {
			return fmt.Errorf("hub: repository id %q: empty or dotted part %q", id, p)
		}
		for _, r := range p {
			ok := r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
			if !ok {
				return fmt.Errorf("hub: repository id %q: character %q not allowed", id, r)
			}
		}
	}
	return nil
}

// ValidateRevision checks that rev is a revision the Hub can name and that
// is safe as a path under refs/: a 40-hex commit, or a branch or tag name
// as git allows them (refs/pr/N included): '/'-separated components that
// are not empty, do not start with '.' or end with ".lock", no "..", no
// "@{", no control characters, spaces or any of ~ ^ : ? * [ \.
func ValidateRevision(rev string) error {
	bad := func(why string) error { return fmt.Errorf("hub: revision %q: %s", rev, why) }
	switch {
	case rev == "":
		return bad("empty")
	case len(rev) > 255:
		return bad("longer than 255 bytes")
	case IsCommit(rev):
		return nil
	case rev == "@":
		return bad(`"@" is not a branch or tag`)
	case strings.Contains(rev, ".."), strings.Contains(rev, "@{"):
		return bad(`".." and "@{" are not allowed`)
	case strings.HasSuffix(rev, "."):
		return bad(`a name may not end with "."`)
	}
	for _, r := range rev {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return bad(fmt.Sprintf("character %q not allowed", r))
		}
	}
	for _, part := range strings.Split(rev, "/") {
		switch {
		case part == "":
			return bad("empty path component (leading, trailing or double '/')")
		case strings.HasPrefix(part, "."):
			return bad(fmt.Sprintf("component %q starts with '.'", part))
		case strings.HasSuffix(part, ".lock"):
			return bad(fmt.Sprintf("component %q ends with \".lock\"", part))
		}
	}
	return nil
}

// repoPath returns the repository id as a URL path ("owner/name", each part
// escaped).
func repoPath(repo string) string {
	parts := strings.Split(repo, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// filePath escapes a repository file path segment by segment.
func filePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// ResolveURL is the download URL of a file at a revision:
// {endpoint}/{repo}/resolve/{revision}/{path}.
func (c *Client) ResolveURL(repo, revision, path string) string {
	return c.endpoint() + "/" + repoPath(repo) + "/resolve/" + url.PathEscape(revision) + "/" + filePath(path)
}
