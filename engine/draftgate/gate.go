package draftgate

import (
	"time"
	"unsafe"
)

// Config tunes a Gate. Zero fields take the defaults.
type Config struct {
	// Window is the steps a window measures (default 4).
	Window int
	// Recheck is the tokens decoded in the chosen mode before the other
	// is measured again (default 32); the interval doubles, up to
	// MaxRecheck (default 512), each time a re-check confirms the choice,
	// and starts over at Recheck when one overturns it.
	Recheck, MaxRecheck int
	// GiveUp ends a re-check's window early once its cost is this many
	// times the chosen mode's (default 1.5): a re-check that is clearly
	// losing stops paying for itself.
	GiveUp float64
	// Clock is the time steps are measured with (default time.Now).
	Clock func() time.Time
	// Always drafts in every step, measuring without deciding: for
	// benchmarks of drafting itself and tests that compare drafts across
	// runs.
	Always bool
}

func (c Config) withDefaults() Config {
	if c.Window <= 0 {
		c.Window = 4
	}
	if c.Recheck <= 0 {
		c.Recheck = 32
	}
	if c.MaxRecheck < c.Recheck {
		c.MaxRecheck = max(512, c.Recheck)
	}
	if !(c.GiveUp > 1) {
		c.GiveUp = 1.5
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// missedDrafts ends a window of drafting early once this many drafts
// were proposed and none accepted: a draft step costs at least a plain
// step (the same forward with a row more, and the MTP layer's), so at
// that acceptance drafting cannot be cheaper.
const missedDrafts = 2

// phase is where a gate stands.
type phase uint8

const (
	exploring  phase = iota // one window of each mode, drafting first
	settled                 // decoding in the chosen mode
	rechecking              // a window of the other mode
)

// Gate decides whether one sequence's lone decode steps draft (see the
// package comment). It is not safe for concurrent use; a driver keeps one
// per sequence so that what it measured carries over the sequence's
// turns.
type Gate struct {
	cfg   Config
	phase phase
	// explored counts the exploring windows done; mode is the chosen mode
	// (once settled).
	explored int
	mode     Mode
	// window is the window being measured (exploring, rechecking).
	window Cost
	// recent holds each mode's latest steps; last each mode's latest
	// complete window.
	recent [2]recentSteps
	last   [2]Cost
	// recheck is the interval in tokens now; since counts the tokens and
	// steps of the chosen mode since the other was last measured.
	recheck           int
	since, sinceSteps int

	total    [2]Cost
	switches int
}

// StateBytes is one gate's memory, which the memory plan counts for each
// sequence (a gate holds no slices or maps: its size is fixed).
const StateBytes = int64(unsafe.Sizeof(Gate{}))

// New returns a gate that starts by exploring.
func New(cfg Config) *Gate {
	cfg = cfg.withDefaults()
	return &Gate{cfg: cfg, recheck: cfg.Recheck}
}

// Now is the gate's clock: a driver times steps with it.
func (g *Gate) Now() time.Time { return g.cfg.Clock() }

// Mode is how the next lone step should run.
func (g *Gate) Mode() Mode {
	if g.cfg.Always {
		return Draft
	}
	switch g.phase {
	case exploring:
		if g.explored == 0 {
			return Draft
		}
		return Plain
	case rechecking:
		return g.mode.other()
	}
	return g.mode
}

// Record adds a lone step. A step that did not run as Mode asked (no room
// in the context for a draft) counts in the totals only.
func (g *Gate) Record(s Step) {
	g.total[s.Mode].Add(s)
	g.recent[s.Mode].add(s)
	if s.Mode != g.Mode() || g.cfg.Always {
		return
	}
	switch g.phase {
	case exploring:
		g.window.Add(s)
		if g.window.Steps < g.cfg.Window && !missed(g.window) {
			return
		}
		g.last[s.Mode], g.window = g.window, Cost{}
		if g.explored++; g.explored < 2 {
			return
		}
		g.mode = Plain
		if g.cheaper(g.last[Draft], g.last[Plain]) {
			g.mode = Draft
		}
		g.settle()
	case settled:
		g.since += s.Tokens
		g.sinceSteps++
		other := g.mode.other()
		// A re-check is due after the interval, or sooner when the chosen
		// mode has become dearer than the other was when last measured
		// (acceptance fell, say), once it has had two windows to show it.
		if g.since >= g.recheck || g.sinceSteps >= 2*g.cfg.Window && g.cheaper(g.last[other], g.recent[g.mode].cost()) {
			g.phase = rechecking
		}
	case rechecking:
		g.window.Add(s)
		chosen := g.recent[g.mode].cost()
		if g.window.Steps < g.cfg.Window && !missed(g.window) && Ratio(g.window, chosen) < g.cfg.GiveUp {
			return
		}
		g.last[s.Mode] = g.window
		if g.cheaper(g.window, chosen) {
			g.mode = s.Mode
			g.switches++
			g.recheck = g.cfg.Recheck
		} else {
			g.recheck = min(2*g.recheck, g.cfg.MaxRecheck)
		}
		g.window = Cost{}
		g.settle()
	}
}

// cheaper reports whether a is cheaper than b, a window of drafting that
// missed every draft never being (the clock's noise aside, it costs more).
func (g *Gate) cheaper(a, b Cost) bool { return !missed(a) && Cheaper(a, b) }

// settle starts decoding in the chosen mode.
func (g *Gate) settle() {
	g.phase = settled
	g.since, g.sinceSteps = 0, 0
}

// missed reports whether a window of drafting has proposed missedDrafts
// drafts without one accepted.
func missed(w Cost) bool { return w.Drafts >= missedDrafts && w.Accepted == 0 }

// Totals is what the gate's lone steps cost in each mode so far.
func (g *Gate) Totals() [2]Cost { return g.total }

// Choice is the mode the gate chose, or Exploring.
func (g *Gate) Choice() string {
	switch {
	case g.cfg.Always:
		return Draft.String()
	case g.phase == exploring:
		return Exploring
	}
	return g.mode.String()
}

// Switches counts the re-checks that overturned the choice.
func (g *Gate) Switches() int { return g.switches }

// Report is what the gate measured and chose.
func (g *Gate) Report() Report { return NewReport(g.Choice(), g.switches, g.total) }

// recentSteps keeps a mode's latest steps.
type recentSteps struct {
	steps [8]Step
	n     int // steps added, all time
}

func (r *recentSteps) add(s Step) {
	r.steps[r.n%len(r.steps)] = s
	r.n++
}

// cost sums the steps kept.
func (r *recentSteps) cost() Cost {
	var c Cost
	for i := range min(r.n, len(r.steps)) {
		c.Add(r.steps[i])
	}
	return c
}
