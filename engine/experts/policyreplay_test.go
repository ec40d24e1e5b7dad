package experts_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/internal/fixtures"
)

// inlineHits are the hits and misses of glm52-mini's recorded traces
// replayed through the streamed tier before the policy had a seam (its
// LRU inline in leaseLocked), 4 LRU slots a layer, no pins: the policy
// behind the seam must keep them exactly.
var inlineHits = map[string]experts.Counters{
	"mini1.trace": {Hits: 3260, Misses: 12796},
	"mini2.trace": {Hits: 2398, Misses: 13681},
}

// TestReplayPolicyMatchesTheStreamedTier replays recorded routing traces
// through the LRU policy alone (ReplayPolicy) and through the streamed
// tier that applies it to real slabs and reads: the same hits, pinned
// hits and misses, layer by layer, with and without pins; and the same as
// the inline policy the seam replaced.
func TestReplayPolicyMatchesTheStreamedTier(t *testing.T) {
	hist := historyOf(t, loadTrace(t, "mini1.trace"))
	for _, tc := range []struct {
		name  string
		trace string
		pins  bool
	}{
		{"LRU", "mini1.trace", false},
		{"LRU", "mini2.trace", false},
		{"LRU and pins", "mini2.trace", true},
	} {
		t.Run(tc.name+" "+tc.trace, func(t *testing.T) {
			trace := loadTrace(t, tc.trace)
			usage := filepath.Join(t.TempDir(), ".coli_usage")
			if err := hist.Save(usage); err != nil {
				t.Fatal(err)
			}
			_, s := openStreamed(t, fixtures.Path(t, "glm52-mini"), func(set int64) experts.StreamOptions {
				o := experts.StreamOptions{CacheBytes: 4 * set, UsagePath: usage}
				if tc.pins {
					o.PinnedBytes = 2 * set
				}
				return o
			}, nil)
			slots := map[int]int{}
			pinned := map[int][]int{}
			for _, st := range trace.Steps {
				if _, ok := slots[st.Layer]; !ok {
					slots[st.Layer] = experts.LRUCapacity(s, st.Layer)
					pinned[st.Layer] = experts.PinnedExperts(s, st.Layer)
				}
			}
			if tc.pins != (len(pinned[trace.Steps[0].Layer]) > 0) {
				t.Fatalf("pins %v, want pins: %v", pinned, tc.pins)
			}
			s.ResetTurn()
			if err := s.Replay(context.Background(), trace); err != nil {
				t.Fatal(err)
			}
			streamed := s.Stats().Turn
			got, _ := experts.ReplayPolicy(trace, func(l int) int { return slots[l] }, func(l int) []int { return pinned[l] }, nil)
			if got.Hits != streamed.Hits || got.PinnedHits != streamed.PinnedHits || got.Misses != streamed.Misses {
				t.Fatalf("ReplayPolicy: %d hits (%d pinned), %d misses; the streamed tier: %d (%d), %d",
					got.Hits, got.PinnedHits, got.Misses, streamed.Hits, streamed.PinnedHits, streamed.Misses)
			}
			t.Logf("%s: hit rate %.4f (%d hits, %d pinned, %d misses)", tc.trace, got.HitRate(), got.Hits, got.PinnedHits, got.Misses)
			if want, ok := inlineHits[tc.trace]; ok && !tc.pins && (got.Hits != want.Hits || got.Misses != want.Misses) {
				t.Fatalf("%d hits and %d misses; the inline policy had %d and %d", got.Hits, got.Misses, want.Hits, want.Misses)
			}
		})
	}
}

// TestReplayPolicyTakesOtherPolicies: a policy that admits nothing never
// hits outside the pins, and its misses are every routing.
func TestReplayPolicyTakesOtherPolicies(t *testing.T) {
	trace := loadTrace(t, "mini2.trace")
	total := 0
	for _, st := range trace.Steps {
		total += len(st.IDs)
	}
	got, _ := experts.ReplayPolicy(trace, func(int) int { return 4 }, nil, func() experts.CachePolicy { return admitNone{&experts.LRUPolicy{}} })
	if got.Hits != 0 || got.Misses != int64(total) {
		t.Fatalf("admit-nothing policy: %d hits, %d misses of %d routings", got.Hits, got.Misses, total)
	}
	lru, _ := experts.ReplayPolicy(trace, func(int) int { return 4 }, nil, nil)
	if lru.Hits == 0 {
		t.Fatal("the LRU hit nothing on a recorded trace")
	}
}

// admitNone streams every miss through the working bank.
type admitNone struct{ *experts.LRUPolicy }

func (admitNone) Admit(misses, free int) int { return 0 }
