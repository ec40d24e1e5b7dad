package draftgate

import (
	"math"
	"time"
)

// Mode is how a decode step runs.
type Mode uint8

const (
	// Plain forwards the sampled token alone.
	Plain Mode = iota
	// Draft runs the MTP layer for a draft of the token after the sampled
	// one and forwards both, emitting two tokens when the draft is
	// accepted.
	Draft
)

func (m Mode) String() string {
	if m == Draft {
		return "draft"
	}
	return "plain"
}

// other is the mode that is not m.
func (m Mode) other() Mode { return 1 - m }

// Step is what one decode step of a sequence cost.
type Step struct {
	Mode Mode
	// Tokens is the tokens the step emitted: 1, or 2 with an accepted
	// draft (0 when the generation ended on a stop).
	Tokens int
	// Accepted says a Draft step's draft was accepted.
	Accepted bool
	// Bytes is the routed-expert bytes the step's forwards read from
	// storage (the MTP layer's included).
	Bytes int64
	// Time is the step's wall time.
	Time time.Duration
}

// Cost sums steps of one mode.
type Cost struct {
	Steps, Tokens int
	// Drafts and Accepted count the drafts proposed and accepted.
	Drafts, Accepted int
	Bytes            int64
	Time             time.Duration
	// TimeSq sums the squares of the steps' seconds, for how much their
	// times vary.
	TimeSq float64
}

// Add adds one step.
func (c *Cost) Add(s Step) {
	c.Steps++
	c.Tokens += s.Tokens
	c.Bytes += s.Bytes
	c.Time += s.Time
	c.TimeSq += s.Time.Seconds() * s.Time.Seconds()
	if s.Mode == Draft {
		c.Drafts++
		if s.Accepted {
			c.Accepted++
		}
	}
}

// Plus is the sum of c and d.
func (c Cost) Plus(d Cost) Cost {
	return Cost{Steps: c.Steps + d.Steps, Tokens: c.Tokens + d.Tokens, Drafts: c.Drafts + d.Drafts, Accepted: c.Accepted + d.Accepted, Bytes: c.Bytes + d.Bytes, Time: c.Time + d.Time, TimeSq: c.TimeSq + d.TimeSq}
}

// BytesPerToken is the expert bytes read per emitted token (0 without
// tokens).
func (c Cost) BytesPerToken() float64 {
	if c.Tokens == 0 {
		return 0
	}
	return float64(c.Bytes) / float64(c.Tokens)
}

// SecondsPerToken is the wall time per emitted token (0 without tokens).
func (c Cost) SecondsPerToken() float64 {
	if c.Tokens == 0 {
		return 0
	}
	return c.Time.Seconds() / float64(c.Tokens)
}

// Acceptance is the share of drafts accepted (0 without drafts).
func (c Cost) Acceptance() float64 {
	if c.Drafts == 0 {
		return 0
	}
	return float64(c.Accepted) / float64(c.Drafts)
}

// TimeMargin is how far apart two times per token must be for time to
// decide between them: closer than this (a share of the larger), or closer
// than the steps' own variation says the clock can tell, the expert bytes
// per token decide.
const TimeMargin = 0.05

// PerToken is what an emitted token costs: its seconds, with the standard
// error of that mean (0 where it is known exactly, infinite where it
// cannot be told), and its expert bytes.
type PerToken struct {
	Seconds, SecondsErr, Bytes float64
}

// PerToken is c's cost per emitted token. The seconds' error is that of
// the mean of its steps' times, per token: infinite for fewer than two
// steps.
func (c Cost) PerToken() PerToken {
	p := PerToken{Seconds: c.SecondsPerToken(), Bytes: c.BytesPerToken(), SecondsErr: math.Inf(1)}
	if n := float64(c.Steps); n >= 2 && c.Tokens > 0 {
		mean := c.Time.Seconds() / n
		variance := max(0, (c.TimeSq-n*mean*mean)/(n-1))
		p.SecondsErr = math.Sqrt(variance/n) / (float64(c.Tokens) / n)
	}
	return p
}

// Ratio is what a token costs under a over what it costs under b (see
// Compare); 1 where either has no tokens.
func Ratio(a, b Cost) float64 {
	if a.Tokens == 0 || b.Tokens == 0 {
		return 1
	}
	return Compare(a.PerToken(), b.PerToken())
}

// Compare is a over b: the ratio of their seconds per token where the
// clock tells them apart (they differ by more than TimeMargin and by more
// than twice the standard error of the difference), else the ratio of
// their expert bytes per token (1 where neither differs). Time comes first
// because it is what a user waits on, bytes next because they are what a
// disk-bound decode's time is made of and, unlike the clock, are not
// noisy.
func Compare(a, b PerToken) float64 {
	ta, tb := a.Seconds, b.Seconds
	d := math.Abs(ta - tb)
	if d > TimeMargin*math.Max(ta, tb) && d > 2*math.Hypot(a.SecondsErr, b.SecondsErr) {
		if tb == 0 {
			return math.Inf(1)
		}
		return ta / tb
	}
	switch {
	case a.Bytes == b.Bytes:
		return 1
	case b.Bytes == 0:
		return math.Inf(1)
	}
	return a.Bytes / b.Bytes
}

// Cheaper reports whether a token costs less under a than under b.
func Cheaper(a, b Cost) bool { return Ratio(a, b) < 1 }
