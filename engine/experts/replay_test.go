package experts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/internal/fixtures"
)

func loadTrace(t *testing.T, name string) *experts.RouteTrace {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := experts.ParseRouteTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// replayPolicy replays trace through a streamed glm52-mini source built
// from opts(set) and returns its counters. A usage history, when given,
// is written first to seed the pins.
func replayPolicy(t *testing.T, trace *experts.RouteTrace, history *experts.Usage, opts func(set int64) experts.StreamOptions) (experts.Counters, experts.Stats) {
	t.Helper()
	usage := filepath.Join(t.TempDir(), ".coli_usage")
	if history != nil {
		if err := history.Save(usage); err != nil {
			t.Fatal(err)
		}
	}
	_, s := openStreamed(t, fixtures.Path(t, "glm52-mini"), func(set int64) experts.StreamOptions {
		o := opts(set)
		o.UsagePath = usage
		return o
	}, nil)
	s.ResetTurn()
	if err := s.Replay(context.Background(), trace); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	return st.Turn, st
}

// TestReplayPolicies measures the cache policies on routing traces that
// glm52-mini recorded while decoding (testdata/mini{1,2}.trace, 400 tokens
// each, different prompts): the same slab memory (4 slots a layer) as a
// plain LRU, as 2 LRU slots a layer plus pins learned from the other
// trace's usage (another prompt: they barely help), as that with live
// re-pinning, and as 2 LRU slots plus 2 pins learned live from nothing.
// Re-pinning must beat both the plain LRU and fixed pins.
func TestReplayPolicies(t *testing.T) {
	learn, eval := loadTrace(t, "mini1.trace"), loadTrace(t, "mini2.trace")
	// The usage a first session leaves behind.
	hist := historyOf(t, learn)
	lru, _ := replayPolicy(t, eval, nil, func(set int64) experts.StreamOptions {
		return experts.StreamOptions{CacheBytes: 4 * set}
	})
	pinned, _ := replayPolicy(t, eval, hist, func(set int64) experts.StreamOptions {
		return experts.StreamOptions{CacheBytes: 4 * set, PinnedBytes: 2 * set}
	})
	repin, st := replayPolicy(t, eval, hist, func(set int64) experts.StreamOptions {
		return experts.StreamOptions{CacheBytes: 4 * set, PinnedBytes: 2 * set, RepinEvery: 16}
	})
	live, st2 := replayPolicy(t, eval, nil, func(set int64) experts.StreamOptions {
		return experts.StreamOptions{CacheBytes: 4 * set, PinnedBytes: 2 * set, RepinEvery: 16}
	})
	t.Logf("4 LRU slots a layer:              hit rate %.3f", lru.HitRate())
	t.Logf("2 LRU + 2 pins learned live:      hit rate %.3f (%d swaps)", live.HitRate(), st2.Repins)
	t.Logf("2 LRU + 2 learned pins a layer:   hit rate %.3f (pinned hits %.3f)", pinned.HitRate(), float64(pinned.PinnedHits)/float64(pinned.Hits+pinned.Misses))
	t.Logf("same with re-pinning every 16:    hit rate %.3f (%d swaps)", repin.HitRate(), st.Repins)
	if live.HitRate() <= lru.HitRate() {
		t.Errorf("pins learned live %.3f do not beat the plain LRU %.3f", live.HitRate(), lru.HitRate())
	}
	if repin.HitRate() <= pinned.HitRate() || repin.HitRate() <= lru.HitRate() {
		t.Errorf("re-pinning %.3f does not beat fixed pins %.3f and the plain LRU %.3f", repin.HitRate(), pinned.HitRate(), lru.HitRate())
	}
}

// historyOf counts a trace's routings as a usage history.
func historyOf(t *testing.T, tr *experts.RouteTrace) *experts.Usage {
	t.Helper()
	var b []byte
	counts := map[[2]int]int{}
	for _, s := range tr.Steps {
		for _, id := range s.IDs {
			counts[[2]int{s.Layer, id}]++
		}
	}
	for k, n := range counts {
		b = append(b, []byte(fmtRecord(k[0], k[1], n))...)
	}
	u, err := experts.ParseUsage(b, tr.Layers, tr.Experts)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
