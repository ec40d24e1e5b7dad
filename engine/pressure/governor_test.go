package pressure_test

import (
	"context"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/pressure"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/native/mempressure"
	"github.com/spoolhq/spool/native/sysinfo"
)

// openStreamed opens glm52-mini with a streamed expert tier whose LRU
// holds every routed expert, nothing pinned.
func openStreamed(t *testing.T) (*loader.Dir, *experts.Streamed) {
	t.Helper()
	var s *experts.Streamed
	d, err := loader.Open(context.Background(), fixtures.Path(t, "glm52-mini"), loader.Options{
		Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			probe, err := experts.NewStreamed(ctx, c, cfg, layers, experts.StreamOptions{WorkingSlots: 1})
			if err != nil {
				return nil, err
			}
			set := probe.SlotSetBytes()
			if err := probe.Close(); err != nil {
				return nil, err
			}
			s, err = experts.NewStreamed(ctx, c, cfg, layers, experts.StreamOptions{CacheBytes: set * int64(cfg.NumRoutedExperts)})
			return s, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, s
}

func generateAll(t *testing.T, d *loader.Dir, prompts [][]int) [][]int {
	t.Helper()
	var out [][]int
	for _, p := range prompts {
		m := d.Model
		res, err := generate.Generate(context.Background(), m, m.NewSequence(0), p, generate.Params{MaxTokens: 16}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.Tokens)
	}
	return out
}

// apply feeds levels to the governor through Run, the path the system's
// monitor drives, and returns once every level is applied.
func apply(g *pressure.Governor, levels ...mempressure.Level) {
	ch := make(chan mempressure.Level)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(context.Background(), "test", ch)
	}()
	for _, l := range levels {
		ch <- l
	}
	close(ch)
	<-done
}

func rss(t *testing.T) uint64 {
	t.Helper()
	f, err := sysinfo.Footprint()
	if err != nil {
		t.Fatal(err)
	}
	return f.RSS
}

// TestPressureShrinksTheExpertCache: under Warning and Critical the
// expert cache gives its slabs back (slab bytes and the process's RSS
// drop), the tokens stay those of the full cache, and at Normal it grows
// back and fills again.
func TestPressureShrinksTheExpertCache(t *testing.T) {
	refs, _ := fixtures.LoadRefs(t, "glm52-mini")
	var prompts [][]int
	for _, c := range refs.Cases {
		prompts = append(prompts, c.PromptIDs)
	}
	d, s := openStreamed(t)
	g := pressure.New(s, nil)
	full := generateAll(t, d, prompts)
	st0, rss0 := s.Stats(), rss(t)
	if st0.Cached == 0 || st0.LRUSlots == 0 {
		t.Fatalf("the cache holds nothing to give back: %+v", st0)
	}
	perLayer := st0.LRUSlots / len(st0.Layers)

	apply(g, mempressure.Warning)
	st1 := s.Stats()
	if gs := g.Stats(); gs.Level != mempressure.Warning || gs.ExpertLRUSlots != perLayer/2 || st1.LRUSlots != len(st0.Layers)*(perLayer/2) {
		t.Fatalf("at Warning: governor %+v, tier %d LRU slots (planned %d a layer)", gs, st1.LRUSlots, perLayer)
	}
	if got := generateAll(t, d, prompts); !slices.EqualFunc(got, full, slices.Equal) {
		t.Fatalf("tokens at Warning %v, want the full cache's %v", got, full)
	}

	apply(g, mempressure.Critical)
	st2, rss2 := s.Stats(), rss(t)
	freed := st0.SlabBytes - st2.SlabBytes
	if st2.LRUSlots != 0 || st2.Cached != 0 || freed <= 0 {
		t.Fatalf("at Critical the tier kept %d LRU slots, %d cached experts (slab bytes %d -> %d)", st2.LRUSlots, st2.Cached, st0.SlabBytes, st2.SlabBytes)
	}
	// The cached experts' slabs were resident; unmapping them must show in
	// RSS (at least half of them: the Go heap may move meanwhile).
	t.Logf("Critical: slab bytes %d -> %d, RSS %d -> %d (cached experts %d)", st0.SlabBytes, st2.SlabBytes, rss0, rss2, st0.Cached)
	if rss2 >= rss0 || rss0-rss2 < uint64(freed)/2 {
		t.Fatalf("RSS %d -> %d after freeing %d slab bytes", rss0, rss2, freed)
	}
	if got := generateAll(t, d, prompts); !slices.EqualFunc(got, full, slices.Equal) {
		t.Fatalf("tokens at Critical %v, want the full cache's %v", got, full)
	}

	apply(g, mempressure.Normal)
	if got := generateAll(t, d, prompts); !slices.EqualFunc(got, full, slices.Equal) {
		t.Fatalf("tokens after the pressure %v, want %v", got, full)
	}
	st3 := s.Stats()
	if st3.LRUSlots != st0.LRUSlots || st3.Cached == 0 {
		t.Fatalf("grown back to %d LRU slots holding %d experts, want %d slots refilled", st3.LRUSlots, st3.Cached, st0.LRUSlots)
	}
	gs := g.Stats()
	if gs.Warnings != 1 || gs.Criticals != 1 || gs.Level != mempressure.Normal || gs.Share != 1 || gs.Source != "test" ||
		gs.ExpertLRUSlots != perLayer || gs.ExpertLRUPlanned != perLayer {
		t.Fatalf("governor stats %+v", gs)
	}
}

type failing struct{}

func (failing) SetLRUShare(float64) (int, error) { return 3, errFailing }

var errFailing = errorString("no memory for slabs")

type errorString string

func (e errorString) Error() string { return string(e) }

func TestApplyReportsAFailedResize(t *testing.T) {
	g := pressure.New(failing{}, nil)
	if err := g.Apply(mempressure.Normal); err == nil {
		t.Fatal("a failed resize was not reported")
	}
	if st := g.Stats(); st.Err == "" || st.ExpertLRUSlots != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestShares(t *testing.T) {
	for l, want := range map[mempressure.Level]float64{mempressure.Normal: 1, mempressure.Warning: 0.5, mempressure.Critical: 0} {
		if got := pressure.Share(l); got != want {
			t.Errorf("Share(%v) = %v, want %v", l, got, want)
		}
	}
}
