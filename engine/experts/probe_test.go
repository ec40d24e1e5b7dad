package experts_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestProbeReadsAndBursts: both disk probes read whole experts until the
// byte budget is spent (bursts a whole number of bursts of distinct
// experts), hand the working bank back, and leave the source exact.
func TestProbeReadsAndBursts(t *testing.T) {
	const model = "glm52-mini"
	ref := residentRef(t, model)
	d, s := openStreamed(t, fixtures.Path(t, model), func(set int64) experts.StreamOptions {
		return experts.StreamOptions{CacheBytes: set, WorkingSlots: 6, Workers: 3, ReadChunk: 4096}
	}, func(s *experts.Streamed) { experts.SetPoison(s, true) })
	ctx := context.Background()
	const budget = 1 << 20

	full, err := s.ProbeReads(ctx, budget, 7)
	if err != nil {
		t.Fatal(err)
	}
	if full.Bytes < budget || full.Experts == 0 || full.Requests < full.Experts || full.Workers != 3 || full.CPUSeconds < 0 {
		t.Errorf("ProbeReads: %+v", full)
	}
	for _, burst := range []int{1, 3, 6, 50} {
		b, err := s.ProbeBursts(ctx, budget, 9, burst)
		if err != nil {
			t.Fatal(err)
		}
		// A burst is min(burst, working slots) experts; the budget is
		// checked between bursts only.
		n := min(burst, 6)
		if b.Bytes < budget || b.Experts%n != 0 || b.Requests < b.Experts {
			t.Errorf("ProbeBursts(%d): %+v, want whole bursts of %d past %d bytes", burst, b, n, budget)
		}
	}
	if _, err := s.ProbeBursts(ctx, budget, 9, 0); err == nil || !strings.Contains(err.Error(), "burst") {
		t.Errorf("a burst of 0: %v", err)
	}
	if err := experts.CheckInvariants(s, true); err != nil {
		t.Error(err)
	}
	for i, p := range ref.prompts {
		if got := generateTokens(t, d, p, false); !slices.Equal(got, ref.plain[i]) {
			t.Errorf("prompt %d after the probes: %v, resident %v", i, got, ref.plain[i])
		}
	}
}
