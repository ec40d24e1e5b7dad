package mempressure

import (
	"fmt"
	"time"
)

// Level is a memory-pressure level.
type Level int

// The levels, in increasing pressure.
const (
	Normal Level = iota
	Warning
	Critical
)

func (l Level) String() string {
	switch l {
	case Normal:
		return "normal"
	case Warning:
		return "warning"
	case Critical:
		return "critical"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// MarshalText makes a Level read as its name in JSON.
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// Linux trigger thresholds: the stall time within each Window that fires
// a level, and the quiet time after which the level steps back to Normal.
const (
	Window    = 2 * time.Second // the kernel lets unprivileged triggers use multiples of 2 s only
	WarnStall = 150 * time.Millisecond
	CritStall = 150 * time.Millisecond
	Calm      = 10 * time.Second
)

// hysteresis turns trigger events into levels: a level holds from its
// last event until Calm has passed without one. It is a pure state
// machine over the times it is given, so it is tested with a fake clock.
type hysteresis struct {
	calm               time.Duration
	lastWarn, lastCrit time.Time
	cur                Level
}

// event records a trigger of level l at now and returns the level that
// results and whether it changed.
func (h *hysteresis) event(l Level, now time.Time) (Level, bool) {
	switch l {
	case Critical:
		h.lastCrit = now
	case Warning:
		h.lastWarn = now
	}
	return h.tick(now)
}

// tick re-evaluates the level at now.
func (h *hysteresis) tick(now time.Time) (Level, bool) {
	l := Normal
	switch {
	case !h.lastCrit.IsZero() && now.Sub(h.lastCrit) < h.calm:
		l = Critical
	case !h.lastWarn.IsZero() && now.Sub(h.lastWarn) < h.calm:
		l = Warning
	}
	changed := l != h.cur
	h.cur = l
	return l, changed
}
