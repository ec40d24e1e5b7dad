package host

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestCleanupsUnwindInReverse: what was opened last is closed first, once,
// and every error is kept.
func TestCleanupsUnwindInReverse(t *testing.T) {
	var c cleanups
	var order []int
	for i := range 3 {
		c.push(func() error {
			order = append(order, i)
			if i == 1 {
				return errors.New("one")
			}
			return nil
		})
	}
	if err := c.unwind(); err == nil || err.Error() != "one" {
		t.Errorf("unwind: %v", err)
	}
	if !slices.Equal(order, []int{2, 1, 0}) {
		t.Errorf("closed in the order %v", order)
	}
	if err := c.unwind(); err != nil || len(order) != 3 {
		t.Errorf("a second unwind ran again (%v, %v)", order, err)
	}
}

// TestOpenChecksBeforeLoading: Check sees the plan before any weight is
// read, and its refusal closes what Open opened; the engine of a one-shot
// run keeps the experts resident when they all fit and has no scheduler.
func TestOpenChecksBeforeLoading(t *testing.T) {
	ctx := context.Background()
	cfg := Config{ModelDir: fixtures.DemoModel(), Memory: Memory{Budget: "8GiB"}, Context: 512, MaxBatch: 1,
		PromptCache: PromptCache{Off: true}, GPU: GPUOff, ResidentWhenCached: true, NoScheduler: true}
	refused := errors.New("the prompt does not fit")
	var seen *plan.Plan
	c := cfg
	c.Check = func(lm *LoadedModel, p *plan.Plan) error {
		if lm.Dir.Model != nil {
			t.Error("the weights were loaded before the check")
		}
		seen = p
		return refused
	}
	if _, err := Open(ctx, c, nil); !errors.Is(err, refused) || seen == nil || seen.Context != 512 {
		t.Fatalf("Open: %v (plan %v)", err, seen)
	}
	e, err := Open(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Experts != nil || e.Scheduler != nil || e.Pressure != nil || e.Model.Dir.Model == nil {
		t.Errorf("a one-shot engine: streamed %v, scheduler %v, pressure %v", e.Experts != nil, e.Scheduler != nil, e.Pressure != nil)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
