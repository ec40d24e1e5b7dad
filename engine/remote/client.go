package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/spoolhq/spool/internal/clock"
	"github.com/spoolhq/spool/internal/notify"
)

// Defaults and limits.
const (
	// DefaultTimeout bounds the wait for the remote's answer to begin and
	// the silence within a streamed answer. A non-streamed completion of
	// thousands of tokens, or a request queued behind others, takes
	// minutes on a loaded server.
	DefaultTimeout = 10 * time.Minute
	// DefaultProbeInterval is how often Run checks that the remote answers.
	DefaultProbeInterval = 10 * time.Second

	dialTimeout  = 10 * time.Second
	probeTimeout = 5 * time.Second
	// maxErrorBody bounds an error answer read for its message.
	maxErrorBody = 1 << 20
	// MaxBody and the answers' budget are in body.go.
)

// Config says which remote engine to use and how.
type Config struct {
	// URL is the remote's base URL, http(s)://host[:port][/prefix]; a
	// trailing /v1 is optional. It may not carry credentials or a query:
	// the key goes in Key.
	URL string
	// Key, when set, is sent to the remote as "Authorization: Bearer KEY"
	// (vLLM's and SGLang's --api-key). It is never echoed.
	Key string
	// Timeout bounds the wait for an answer to begin and the silence
	// within a stream (default DefaultTimeout).
	Timeout time.Duration
	// ProbeInterval is the period of Run's reachability checks (default
	// DefaultProbeInterval).
	ProbeInterval time.Duration
	// Transport, when set, carries the requests (tests); by default the
	// client has a transport of its own.
	Transport http.RoundTripper
	// Clock times the requests' figures (default: the system clock).
	Clock clock.Clock
}

// Client talks to one remote engine. Its methods are safe for concurrent
// use.
type Client struct {
	base       *url.URL
	key        string
	timeout    time.Duration
	probeEvery time.Duration
	http       *http.Client
	kick       chan struct{}
	// maxBody and bodies bound non-streamed answers (body.go).
	maxBody int64
	bodies  *bodyBudget

	clock   clock.Clock
	changes notify.Notifier

	mu     sync.Mutex
	status Status
}

// ParseURL checks and normalizes a remote engine's base URL: http or
// https, a host, no user information, query or fragment, and no trailing
// slash or /v1 (the client adds the API paths).
func ParseURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, errors.New("remote: the remote engine's URL is empty")
	}
	if !strings.Contains(raw, "://") {
		return nil, fmt.Errorf("remote: the remote engine's URL must start with http:// or https://, as in http://%s", raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("remote: the remote engine's URL is not a valid URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("remote: the remote engine's URL must be http:// or https://, not %s://", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("remote: the remote engine's URL has no host")
	case u.User != nil:
		return nil, errors.New("remote: the remote engine's URL may not hold a user or password: pass the key with --remote-key")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, errors.New("remote: the remote engine's URL may not hold a query: pass the key with --remote-key")
	case u.Fragment != "":
		return nil, errors.New("remote: the remote engine's URL may not hold a fragment (#...)")
	}
	if p := u.Port(); p != "" {
		if _, err := net.LookupPort("tcp", p); err != nil {
			return nil, fmt.Errorf("remote: the remote engine's port %q is not a port number", p)
		}
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1")
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// New checks cfg and returns its client. It does not contact the remote.
func New(cfg Config) (*Client, error) {
	base, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(cfg.Key, "\r\n") {
		return nil, errors.New("remote: the remote key may not hold a line break")
	}
	c := &Client{
		base:       base,
		key:        strings.TrimSpace(cfg.Key),
		timeout:    cfg.Timeout,
		probeEvery: cfg.ProbeInterval,
		kick:       make(chan struct{}, 1),
		clock:      clock.Or(cfg.Clock),
		maxBody:    MaxBody,
		bodies:     newBodyBudget(DefaultBodyBudget),
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.probeEvery <= 0 {
		c.probeEvery = DefaultProbeInterval
	}
	tr := cfg.Transport
	if tr == nil {
		tr = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   dialTimeout,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
			ForceAttemptHTTP2:     true,
		}
	}
	c.http = &http.Client{
		Transport: tr,
		// A redirect could carry the key elsewhere; the user is told the
		// new address instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	c.status.Endpoint = c.Endpoint()
	c.status.Models = []Model{}
	return c, nil
}

// Endpoint is the remote's base URL as users see it (never with a key).
func (c *Client) Endpoint() string { return c.base.String() }

// Do sends a request to the remote: path is an API path such as
// "/v1/chat/completions", body a JSON document or nil. A 2xx answer is
// returned for the caller to read and close; its body times out after
// Timeout without data. Anything else (an error status, a redirect, a
// transport failure, a timeout) is an *Error; the caller's own
// cancellation is returned as its context's error.
func (c *Client) Do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	u := *c.base
	u.Path = c.base.Path + path
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		cancel(nil)
		return nil, c.errorf(KindProtocol, "building the request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("User-Agent", "spool-remote")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	wd := newWatchdog(c.timeout, cancel)
	resp, err := c.http.Do(req)
	if err != nil {
		wd.stop()
		cause := context.Cause(ctx)
		cancel(nil)
		return nil, c.transportError(ctx, cause, err, "answer")
	}
	c.markReachable()
	c.scrubHeader(resp.Header)
	if resp.StatusCode/100 == 2 {
		// The silence limit runs from the answer's start.
		wd.reset(c.timeout)
		resp.Body = &watchedBody{rc: resp.Body, wd: wd, ctx: ctx, cancel: cancel, c: c, parent: parent}
		return resp, nil
	}
	defer func() {
		wd.stop()
		resp.Body.Close()
		cancel(nil)
	}()
	if resp.StatusCode/100 == 3 {
		loc := "another address"
		if l, err := resp.Location(); err == nil {
			loc = l.Scheme + "://" + l.Host + l.Path
		}
		return nil, c.errorf(KindProtocol, "the remote engine redirected %s to %s: point Spool at that URL", path, loc)
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return nil, c.statusError(resp, data)
}

// transportError classifies a failed exchange: the caller's cancellation,
// a timeout, or an unreachable remote.
func (c *Client) transportError(ctx context.Context, cause, err error, what string) error {
	switch {
	case errors.Is(cause, errTimedOut):
		return c.errorf(KindTimeout, "the remote engine at %s sent no %s for %s", c.Endpoint(), what, c.timeout)
	case ctx.Err() != nil && cause != nil:
		return cause
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.markUnreachable("timed out")
		return c.errorf(KindTimeout, "the remote engine at %s did not answer in time: %v", c.Endpoint(), err)
	}
	c.markUnreachable(c.scrub(err.Error()))
	return c.errorf(KindUnreachable, "the remote engine at %s is not reachable: %v", c.Endpoint(), err)
}

// watchdog cancels a request when no data has moved for its timeout.
type watchdog struct{ t *time.Timer }

var errTimedOut = errors.New("remote: timed out")

func newWatchdog(d time.Duration, cancel context.CancelCauseFunc) *watchdog {
	return &watchdog{t: time.AfterFunc(d, func() { cancel(errTimedOut) })}
}

func (w *watchdog) reset(d time.Duration) { w.t.Reset(d) }
func (w *watchdog) stop()                 { w.t.Stop() }

// watchedBody is a 2xx answer's body: each read restarts the watchdog; a
// silence past the timeout or a broken connection reads as an *Error.
type watchedBody struct {
	rc     io.ReadCloser
	wd     *watchdog
	ctx    context.Context
	cancel context.CancelCauseFunc
	c      *Client
	once   sync.Once
	// parent is the caller's context: a body read whole counts against
	// the client's budget until it ends (body.go).
	parent context.Context
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.wd.reset(b.c.timeout)
	}
	if err != nil && err != io.EOF {
		cause := context.Cause(b.ctx)
		if errors.Is(cause, errTimedOut) {
			return n, b.c.errorf(KindTimeout, "the remote engine at %s sent nothing for %s", b.c.Endpoint(), b.c.timeout)
		}
		if b.ctx.Err() != nil && cause != nil {
			return n, cause
		}
		return n, b.c.errorf(KindUnreachable, "the connection to the remote engine at %s broke: %v", b.c.Endpoint(), b.c.scrub(err.Error()))
	}
	return n, err
}

// Close stops the watchdog and ends the request (the remote sees its
// connection close and stops generating).
func (b *watchedBody) Close() error {
	var err error
	b.once.Do(func() {
		b.wd.stop()
		b.cancel(context.Canceled)
		err = b.rc.Close()
	})
	return err
}
