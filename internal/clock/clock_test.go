package clock

import (
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := NewFake(t0)
	if !f.Now().Equal(t0) {
		t.Fatal(f.Now())
	}
	f.Advance(1500 * time.Millisecond)
	if got := f.Now().Sub(t0); got != 1500*time.Millisecond {
		t.Fatalf("advanced %v", got)
	}
	if _, ok := Or(nil).(Real); !ok || Or(f) != f {
		t.Fatal("Or")
	}
}
