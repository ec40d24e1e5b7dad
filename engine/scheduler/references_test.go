package scheduler_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/fixturemodel"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestGreedyMatchesReferences: through the scheduler, every reference
// case's greedy continuation is the reference's (HF transformers, float64),
// on the fixture glm52-mini and on the demo model: the cases batched
// together (half of them speculative), then each again alone with its
// prompt's blocks restored from the prompt cache's disk tier after a
// restart.
func TestGreedyMatchesReferences(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"glm52-mini", fixtures.DemoName} {
		t.Run(name, func(t *testing.T) {
			d := fixturemodel.Shared(t, name)
			m := d.Model
			refs, _ := fixtures.LoadRefs(t, name)
			id, err := promptcache.IdentityOf(ctx, d, "test", fingerprint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			open := func(memory int64) *promptcache.Cache {
				c, err := promptcache.New(promptcache.Options{Identity: id, MemoryBytes: memory, Dir: dir, DiskBytes: 1 << 30, MinFreeBytes: -1, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			request := func(cs fixtures.Case, speculative bool) scheduler.Request {
				return scheduler.Request{Prompt: cs.PromptIDs, Params: generate.Params{MaxTokens: len(cs.Greedy), Speculative: speculative}}
			}

			cache := open(64 << 20)
			s, stop := startStoppable(m, scheduler.Config{MaxBatch: len(refs.Cases), PromptCache: cache, IdleSequences: -1})
			var streams []*scheduler.Stream
			for i, cs := range refs.Cases {
				st, err := s.Submit(ctx, request(cs, i%2 == 0))
				if err != nil {
					t.Fatal(err)
				}
				streams = append(streams, st)
			}
			batched := false
			for i, st := range streams {
				toks, res := collect(t, st)
				checkReferenceGreedy(t, "batched", refs.Cases[i], ids(toks))
				batched = batched || res.Lane == scheduler.LaneBatched
			}
			if !batched {
				t.Error("no request was batched")
			}
			stop()
			if err := cache.Close(); err != nil {
				t.Fatal(err)
			}

			cache = open(0)
			defer cache.Close()
			s, stop = startStoppable(m, scheduler.Config{PromptCache: cache, IdleSequences: -1})
			defer stop()
			B := promptcache.DefaultBlockTokens
			for i, cs := range refs.Cases {
				st, err := s.Submit(ctx, request(cs, i%2 == 1))
				if err != nil {
					t.Fatal(err)
				}
				toks, res := collect(t, st)
				checkReferenceGreedy(t, "from the prompt cache", cs, ids(toks))
				// The last prompt token is always forwarded: a block ending
				// there is not reused.
				if want := (cs.N - 1) / B * B; res.RestoredTokens < want {
					t.Errorf("case %s: %d prompt tokens restored, want at least %d", cs.Label, res.RestoredTokens, want)
				}
			}
		})
	}
}

// checkReferenceGreedy compares greedy tokens with the case's reference
// continuation up to their first difference, which may only come at a
// near-tie of the reference (margin at most 1e-3, as in engine/model's
// parity tests).
func checkReferenceGreedy(t *testing.T, what string, cs fixtures.Case, got []int) {
	t.Helper()
	if len(got) == 0 || len(got) > len(cs.Greedy) {
		t.Errorf("%s, case %s: %d tokens, want 1 to %d", what, cs.Label, len(got), len(cs.Greedy))
		return
	}
	for i, id := range got {
		if id != cs.Greedy[i] {
			if cs.GreedyMargins[i] > 1e-3 {
				t.Errorf("%s, case %s: token %d is %d, want %d (margin %.3g)\n got %v\nwant %v", what, cs.Label, i, id, cs.Greedy[i], cs.GreedyMargins[i], got, cs.Greedy)
			}
			return
		}
	}
}
