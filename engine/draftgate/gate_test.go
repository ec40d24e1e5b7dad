package draftgate

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestRatio(t *testing.T) {
	// cost is two steps of ms/2 each: their times agree, so the clock
	// tells a difference beyond TimeMargin.
	cost := func(tokens int, bytes int64, ms int) Cost {
		var c Cost
		for range 2 {
			c.Add(Step{Mode: Plain, Tokens: tokens / 2, Bytes: bytes / 2, Time: time.Duration(ms) * time.Millisecond / 2})
		}
		c.Tokens, c.Bytes = tokens, bytes
		return c
	}
	// noisy is the same with steps of 0 and ms: the clock cannot tell.
	noisy := func(tokens int, bytes int64, ms int) Cost {
		c := cost(tokens, bytes, ms)
		c.TimeSq = math.Pow(float64(ms)/1000, 2)
		return c
	}
	for _, tc := range []struct {
		name string
		a, b Cost
		want float64
	}{
		{"time decides", cost(1, 100, 200), cost(1, 100, 100), 2},
		{"time decides against the bytes", cost(2, 300, 100), cost(1, 100, 100), 0.5},
		{"times within the margin: bytes decide", cost(1, 200, 104), cost(1, 100, 100), 2},
		{"times equal: bytes decide", cost(2, 300, 200), cost(1, 100, 100), 1.5},
		{"a frozen clock: bytes decide", cost(2, 150, 0), cost(1, 100, 0), 0.75},
		{"nothing differs", cost(1, 0, 0), cost(1, 0, 0), 1},
		{"no bytes to compare with", cost(1, 10, 0), cost(1, 0, 0), math.Inf(1)},
		{"no time to compare with", cost(1, 0, 10), cost(1, 0, 0), math.Inf(1)},
		{"no tokens: unknown", Cost{}, cost(1, 100, 100), 1},
		{"times too noisy to tell: bytes decide", noisy(2, 300, 150), noisy(2, 200, 200), 1.5},
		{"one step: its time cannot be told apart", Cost{Steps: 1, Tokens: 1, Bytes: 100, Time: time.Second}, cost(2, 400, 500), 0.5},
	} {
		if got := Ratio(tc.a, tc.b); got != tc.want && math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: Ratio = %g, want %g", tc.name, got, tc.want)
		}
	}
	if !Cheaper(cost(2, 150, 0), cost(1, 100, 0)) || Cheaper(cost(1, 100, 0), cost(1, 100, 0)) {
		t.Error("Cheaper disagrees with Ratio")
	}
}

// machine prices a sequence's steps from counts: a plain step reads plain
// bytes, a draft step draft bytes (the MTP layer's and the union of two
// positions' experts), each in the time its bytes take at one byte a
// microsecond (or draftTime microseconds for a draft step when set), or in
// no time with frozen. With jitter the steps' times swing between a tenth
// and 1.9 times that, in turn.
type machine struct {
	plain, draft int64
	draftTime    int64
	frozen       bool
	jitter       bool
	steps        *int
}

func (m machine) step(mode Mode, accepted bool) Step {
	s := Step{Mode: mode, Tokens: 1, Bytes: m.plain}
	us := m.plain
	if mode == Draft {
		s.Bytes, s.Accepted, us = m.draft, accepted, m.draft
		if m.draftTime > 0 {
			us = m.draftTime
		}
		if accepted {
			s.Tokens = 2
		}
	}
	if m.jitter {
		*m.steps++
		if *m.steps%2 == 0 {
			us = us / 10
		} else {
			us = us * 19 / 10
		}
	}
	if !m.frozen {
		s.Time = time.Duration(us) * time.Microsecond
	}
	return s
}

// run decodes tokens through g on m, the draft of the step at token i
// accepted when accept(i), and returns the steps' modes as runs ("D4 P4
// D16 ...").
func run(g *Gate, m machine, tokens int, accept func(i int) bool) string {
	var runs []string
	last, n := Mode(0), 0
	for i := 0; i < tokens; {
		mode := g.Mode()
		s := m.step(mode, accept(i))
		g.Record(s)
		i += s.Tokens
		if n > 0 && mode != last {
			runs = append(runs, fmt.Sprintf("%c%d", strings.ToUpper(last.String())[0], n))
			n = 0
		}
		last = mode
		n++
	}
	return strings.Join(append(runs, fmt.Sprintf("%c%d", strings.ToUpper(last.String())[0], n)), " ")
}

func never(int) bool  { return false }
func always(int) bool { return true }

func TestGateDecides(t *testing.T) {
	for _, tc := range []struct {
		name   string
		m      machine
		tokens int
		accept func(int) bool
		want   string
		choice Mode
	}{
		{
			// Drafts never accepted: two missed drafts end the first
			// window; plain is chosen, then re-checked after 32, 64, 128,
			// 256 and 512 tokens, each time one draft step that costs more
			// than GiveUp times a plain token ending the re-check.
			name: "rarely accepted", m: machine{plain: 100, draft: 210}, tokens: 1100, accept: never,
			want: "D2 P36 D1 P64 D1 P128 D1 P256 D1 P512 D1 P97", choice: Plain,
		},
		{
			// Drafts always accepted, a draft step reading 1.5 tokens'
			// bytes for two: drafting is chosen; plain windows re-check
			// it after 32, 64 and 128 tokens (16, 32 and 64 draft steps).
			name: "often accepted", m: machine{plain: 100, draft: 150}, tokens: 300, accept: always,
			want: "D4 P4 D16 P4 D32 P4 D64 P4 D26", choice: Draft,
		},
		{
			// The same on a frozen clock: the bytes alone decide.
			name: "often accepted, bytes alone", m: machine{plain: 100, draft: 150, frozen: true}, tokens: 300, accept: always,
			want: "D4 P4 D16 P4 D32 P4 D64 P4 D26", choice: Draft,
		},
		{
			// Accepted, but two positions' experts cost more than two
			// tokens' (no shared experts, the MTP layer on top): plain.
			name: "accepted but dearer", m: machine{plain: 100, draft: 230}, tokens: 60, accept: always,
			want: "D4 P36 D4 P8", choice: Plain,
		},
		{
			// Nothing to tell the modes apart (in memory on a frozen
			// clock): plain, the mode that reads no MTP layer.
			name: "no difference", m: machine{frozen: true}, tokens: 60, accept: always,
			want: "D4 P36 D4 P8", choice: Plain,
		},
		{
			// Drafts read fewer bytes a token but take 30% longer a token
			// (a machine whose reads are cheap, say): the clock decides.
			name: "slower though it reads less", m: machine{plain: 100, draft: 150, draftTime: 260}, tokens: 60, accept: always,
			want: "D4 P36 D4 P8", choice: Plain,
		},
		{
			// The same on a clock whose steps swing from a tenth to
			// nearly twice their time: it cannot tell the modes apart, and
			// the bytes decide.
			name: "a clock too noisy to tell", m: machine{plain: 100, draft: 150, draftTime: 260, jitter: true, steps: new(int)}, tokens: 60, accept: always,
			want: "D4 P4 D16 P4 D6", choice: Draft,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Config{})
			if got := run(g, tc.m, tc.tokens, tc.accept); got != tc.want {
				t.Errorf("steps %s\n  want %s", got, tc.want)
			}
			if g.Mode() != tc.choice {
				t.Errorf("choice %v, want %v", g.Mode(), tc.choice)
			}
		})
	}
}

// TestGateFollowsAcceptance: acceptance that falls mid-answer turns
// drafting off well before the interval (the chosen mode's recent steps
// cost more than plain did), and acceptance that returns turns it back on
// at the next re-check.
func TestGateFollowsAcceptance(t *testing.T) {
	g := New(Config{})
	m := machine{plain: 100, draft: 150}
	const off, on = 100, 300
	accept := func(i int) bool { return i < off || i >= on }
	var offAt, onAt int
	for i := 0; i < 500; {
		mode := g.Mode()
		if i > off && g.Choice() == "plain" && offAt == 0 {
			offAt = i
		}
		if i >= on && g.Choice() == "draft" && onAt == 0 {
			onAt = i
		}
		s := m.step(mode, accept(i))
		g.Record(s)
		i += s.Tokens
	}
	// Off: within two windows of draft steps and a window of plain ones.
	if offAt == 0 || offAt > off+3*4 {
		t.Errorf("drafting turned off at token %d, want by %d", offAt, off+3*4)
	}
	// On: plain was chosen by the re-check just before off (32 tokens
	// apart), so the interval is 32 again: within it and a window.
	if onAt == 0 || onAt > on+32+2*4 {
		t.Errorf("drafting turned back on at token %d, want by %d", onAt, on+32+2*4)
	}
	if r := g.Report(); r.Choice != "draft" || r.Switches < 2 {
		t.Errorf("report %+v, want drafting after two switches or more", r)
	}
	t.Logf("off at %d, on at %d; %+v", offAt, onAt, g.Report())
}

// TestGateIgnoresOtherSteps: a step that could not run as asked (no room
// to draft) counts in the totals but not in the window.
func TestGateIgnoresOtherSteps(t *testing.T) {
	g := New(Config{})
	m := machine{plain: 100, draft: 150}
	for range 10 {
		g.Record(m.step(Plain, false))
	}
	if g.Mode() != Draft || g.phase != exploring {
		t.Fatalf("mode %v in phase %d after plain steps while exploring drafts", g.Mode(), g.phase)
	}
	if tot := g.Totals(); tot[Plain].Steps != 10 || tot[Draft].Steps != 0 {
		t.Errorf("totals %+v", tot)
	}
}

func TestGateClock(t *testing.T) {
	at := time.Unix(1000, 0)
	g := New(Config{Clock: func() time.Time { return at }})
	if !g.Now().Equal(at) {
		t.Errorf("Now %v, want the config's clock %v", g.Now(), at)
	}
}

func TestReport(t *testing.T) {
	r := NewReport("draft", 2, [2]Cost{
		Plain: {Steps: 4, Tokens: 4, Bytes: 400, Time: 2 * time.Second},
		Draft: {Steps: 4, Tokens: 7, Drafts: 4, Accepted: 3, Bytes: 700, Time: 3500 * time.Millisecond},
	})
	if r.Choice != "draft" || r.Switches != 2 || r.Acceptance != 0.75 ||
		r.Plain.BytesPerToken != 100 || r.Plain.SecondsPerToken != 0.5 || r.Draft.BytesPerToken != 100 || r.Draft.SecondsPerToken != 0.5 || r.Draft.Tokens != 7 {
		t.Errorf("report %+v", r)
	}
}

// TestGateAlways: an Always gate drafts every step, whatever they cost,
// and still sums what they cost.
func TestGateAlways(t *testing.T) {
	g := New(Config{Always: true})
	if got := run(g, machine{plain: 100, draft: 300}, 40, never); got != "D40" {
		t.Errorf("steps %s, want D40", got)
	}
	if r := g.Report(); r.Choice != "draft" || r.Draft.Steps != 40 || r.Acceptance != 0 {
		t.Errorf("report %+v", r)
	}
}

func TestModeCostRoundTrip(t *testing.T) {
	c := Cost{Steps: 3, Tokens: 5, Drafts: 3, Accepted: 2, Bytes: 700, Time: 1500 * time.Millisecond}
	if got := NewReport("draft", 0, [2]Cost{Draft: c}).Draft.Cost(); got != c {
		t.Errorf("round trip %+v, want %+v", got, c)
	}
}
