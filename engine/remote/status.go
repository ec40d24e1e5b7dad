package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Status is what Spool knows of the remote: whether it answered its last
// probe, how long the round trip took, its models, and the requests that
// passed through.
type Status struct {
	// Endpoint is the remote's base URL (never with a key).
	Endpoint string `json:"endpoint"`
	// Reachable reports the last exchange: a probe or a request that got
	// an answer (any status) is reachable; a failed connection is not.
	Reachable bool `json:"reachable"`
	// CheckedAt is the last probe's time; nil before the first.
	CheckedAt *time.Time `json:"checked_at"`
	// LatencyMS is the last successful probe's round trip (GET /v1/models).
	LatencyMS float64 `json:"latency_ms"`
	// Error says why the remote is not reachable.
	Error  string  `json:"error,omitempty"`
	Models []Model `json:"models"`
	// Active counts requests in flight through Spool; Requests and Failed
	// count them since the start (a request its client cancelled has not
	// failed).
	Active   int   `json:"active"`
	Requests int64 `json:"requests"`
	Failed   int64 `json:"failed"`
	// Last is the most recent request that ended.
	Last *Turn `json:"last_turn,omitempty"`
}

// Turn is one request that went through to the remote, with the figures
// of the remote's own usage report.
type Turn struct {
	Path   string `json:"path"`
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	// Outcome is "ok", "cancelled" or the error's kind.
	Outcome          string `json:"outcome"`
	PromptTokens     int    `json:"prompt_tokens"`
	CachedTokens     int    `json:"cached_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
	// FirstTokenMS is the time to the first output of a stream (the
	// remote's queue and prefill plus the network); DurationMS the whole
	// request.
	FirstTokenMS float64 `json:"first_token_ms"`
	DurationMS   float64 `json:"duration_ms"`
	// DecodeTokensPerSecond is the completion tokens after the first over
	// the time since the first output (streams only); TokensPerSecond the
	// completion tokens over the whole request. Both come from the
	// remote's usage; 0 when it sent none.
	DecodeTokensPerSecond float64 `json:"decode_tokens_per_second"`
	TokensPerSecond       float64 `json:"tokens_per_second"`
}

// Rate is the turn's best measured generation rate: the decode rate of a
// stream, else the end-to-end rate.
func (t *Turn) Rate() float64 {
	if t.DecodeTokensPerSecond > 0 {
		return t.DecodeTokensPerSecond
	}
	return t.TokensPerSecond
}

// Status returns a snapshot.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.status
	st.Models = append([]Model{}, st.Models...)
	if st.Last != nil {
		last := *st.Last
		st.Last = &last
	}
	if st.CheckedAt != nil {
		at := *st.CheckedAt
		st.CheckedAt = &at
	}
	return st
}

// Changes subscribes to the status: the channel is signalled after each
// change (a probe, a request's start or end); stop ends the subscription.
func (c *Client) Changes() (changed <-chan struct{}, stop func()) { return c.changes.Subscribe() }

func (c *Client) markReachable() {
	c.mu.Lock()
	changed := !c.status.Reachable || c.status.Error != ""
	c.status.Reachable, c.status.Error = true, ""
	c.mu.Unlock()
	if changed {
		c.changes.Notify()
	}
}

// markUnreachable records a failed connection and asks Run for an early
// probe, so that the status recovers as soon as the remote does.
func (c *Client) markUnreachable(why string) {
	c.mu.Lock()
	c.status.Reachable, c.status.Error = false, why
	c.mu.Unlock()
	c.changes.Notify()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Probe asks the remote for its models (at most a few seconds) and
// records whether it answered and how fast.
func (c *Client) Probe(ctx context.Context) Status {
	ctx, cancel := context.WithTimeout(ctx, min(probeTimeout, c.timeout))
	defer cancel()
	start := c.clock.Now()
	_, err := c.Models(ctx)
	now := c.clock.Now()
	c.mu.Lock()
	c.status.CheckedAt = &now
	if err == nil {
		c.status.Reachable, c.status.Error = true, ""
		c.status.LatencyMS = float64(now.Sub(start).Microseconds()) / 1000
	} else if errors.Is(err, context.DeadlineExceeded) {
		c.status.Reachable = false
		c.status.Error = fmt.Sprintf("the remote engine at %s did not list its models within %s", c.Endpoint(), min(probeTimeout, c.timeout))
	} else if ctx.Err() == nil {
		c.status.Reachable, c.status.Error = false, c.scrub(err.Error())
	}
	c.mu.Unlock()
	c.changes.Notify()
	return c.Status()
}

// Run probes the remote now and then every ProbeInterval (sooner after a
// request failed to connect), until ctx ends.
func (c *Client) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
			t.Stop()
			// A burst of failures probes once, a second later.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		c.Probe(ctx)
		t.Reset(c.probeEvery)
	}
}

// Call follows one request through to the remote. Its methods may be
// called from one goroutine at a time; End is idempotent.
type Call struct {
	c     *Client
	turn  Turn
	start time.Time
	first time.Time
	once  sync.Once
}

// Begin counts a request to path for model as in flight.
func (c *Client) Begin(path, model string, stream bool) *Call {
	c.mu.Lock()
	c.status.Active++
	c.status.Requests++
	c.mu.Unlock()
	c.changes.Notify()
	return &Call{c: c, turn: Turn{Path: path, Model: model, Stream: stream}, start: c.clock.Now()}
}

// Output marks the first output of the answer (later calls do nothing).
func (t *Call) Output() {
	if t.first.IsZero() {
		t.first = t.c.clock.Now()
	}
}

// Usage records the remote's usage report.
func (t *Call) Usage(prompt, cached, completion int) {
	t.turn.PromptTokens, t.turn.CachedTokens, t.turn.CompletionTokens = prompt, cached, completion
}

// End finishes the call: err nil is a complete answer.
func (t *Call) End(err error) {
	t.once.Do(func() {
		now := t.c.clock.Now()
		tu := t.turn
		tu.Outcome = outcomeOf(err)
		tu.DurationMS = ms(now.Sub(t.start))
		if !t.first.IsZero() {
			tu.FirstTokenMS = ms(t.first.Sub(t.start))
			if d := now.Sub(t.first); tu.CompletionTokens > 1 && d > 0 && tu.Stream {
				tu.DecodeTokensPerSecond = float64(tu.CompletionTokens-1) / d.Seconds()
			}
		}
		if d := now.Sub(t.start); tu.CompletionTokens > 0 && d > 0 {
			tu.TokensPerSecond = float64(tu.CompletionTokens) / d.Seconds()
		}
		c := t.c
		c.mu.Lock()
		c.status.Active--
		if err != nil && !errors.Is(err, context.Canceled) {
			c.status.Failed++
		}
		c.status.Last = &tu
		c.mu.Unlock()
		c.changes.Notify()
	})
}

func outcomeOf(err error) string {
	if err == nil {
		return "ok"
	}
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Kind.String()
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return "error"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
