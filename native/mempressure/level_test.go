package mempressure

import (
	"encoding/json"
	"testing"
	"time"
)

func TestHysteresis(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		event   Level // Normal: a tick
		at      float64
		want    Level
		changed bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"quiet stays normal", []step{{Normal, 1, Normal, false}, {Normal, 100, Normal, false}}},
		{"warning then calm", []step{
			{Warning, 0, Warning, true}, {Normal, 5, Warning, false}, {Normal, 9.9, Warning, false}, {Normal, 10, Normal, true},
		}},
		{"repeated warnings hold the level", []step{
			{Warning, 0, Warning, true}, {Warning, 8, Warning, false}, {Normal, 12, Warning, false}, {Normal, 18, Normal, true},
		}},
		{"critical outranks warning, then steps down through it", []step{
			{Warning, 0, Warning, true}, {Critical, 2, Critical, true}, {Warning, 6, Critical, false},
			{Normal, 12, Warning, true}, {Normal, 16, Normal, true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := hysteresis{calm: 10 * time.Second}
			for i, s := range c.steps {
				var got Level
				var changed bool
				if s.event == Normal {
					got, changed = h.tick(at(s.at))
				} else {
					got, changed = h.event(s.event, at(s.at))
				}
				if got != s.want || changed != s.changed {
					t.Fatalf("step %d (%v at %vs): got %v changed=%v, want %v changed=%v", i, s.event, s.at, got, changed, s.want, s.changed)
				}
			}
		})
	}
}

func TestLevelNames(t *testing.T) {
	b, err := json.Marshal(map[string]Level{"a": Normal, "b": Warning, "c": Critical})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"a":"normal","b":"warning","c":"critical"}`; got != want {
		t.Fatalf("JSON %s, want %s", got, want)
	}
	if got := Level(7).String(); got != "Level(7)" {
		t.Fatalf("unknown level reads %q", got)
	}
}

func TestSendKeepsTheLatestLevel(t *testing.T) {
	m := &Monitor{levels: make(chan Level, 1)}
	m.send(Warning)
	m.send(Critical)
	m.send(Normal)
	if got := <-m.levels; got != Normal {
		t.Fatalf("a slow reader got %v, want the latest level (normal)", got)
	}
	select {
	case l := <-m.levels:
		t.Fatalf("a stale level %v was kept", l)
	default:
	}
}
