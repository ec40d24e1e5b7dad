package scheduler_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/modeldir"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestPromptCacheExact: through the scheduler, on both fixtures, with DSA
// active (the long reference prompt) and MTP speculation on and off,
// greedy and seeded: the next turn of a prompt whose blocks the prompt
// cache holds gives exactly the tokens of a run from scratch, batched with
// other requests (blocks from memory) and alone after a restart (blocks
// from disk; with speculation the drafts are those of a run from scratch,
// so the MTP state came back too). No idle sequence is kept, so every
// reused token comes from the cache.
func TestPromptCacheExact(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"glm52-tiny", "glm52-mini"} {
		t.Run(name, func(t *testing.T) {
			d, err := modeldir.Open(ctx, fixtures.Path(t, name), modeldir.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			m := d.Model
			refs, _ := fixtures.LoadRefs(t, name)
			prompt := refs.Cases[len(refs.Cases)-1].PromptIDs
			if len(prompt) <= m.Config().IndexTopK || !m.HasDSA() || !m.HasMTP() {
				t.Fatalf("the long case has %d tokens (index_topk %d)", len(prompt), m.Config().IndexTopK)
			}
			turn := slices.Concat(prompt, []int{39, 40, 41, 42, 43})
			var params []generate.Params
			for _, spec := range []bool{false, true} {
				for _, s := range []generate.Sampling{{}, {Temperature: 0.9, TopP: 0.95, Seed: 11}} {
					params = append(params, generate.Params{MaxTokens: 10, Sampling: s, Speculative: spec})
				}
			}
			want := make([]*generate.Result, len(params))
			for i, p := range params {
				p.PrefillChunk = 40
				if want[i], err = generate.Generate(ctx, m, m.NewSequence(0), turn, p, nil); err != nil {
					t.Fatal(err)
				}
			}
			id, err := promptcache.IdentityOf(d, "test")
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
			B := promptcache.DefaultBlockTokens
			check := func(what string, i int, toks []scheduler.Token, res *scheduler.Result) {
				t.Helper()
				if res.CachedTokens < len(prompt)/B*B || res.RestoredTokens != res.CachedTokens {
					t.Errorf("%s %+v: %d cached, %d restored, want at least %d", what, params[i], res.CachedTokens, res.RestoredTokens, len(prompt)/B*B)
				}
				if !slices.Equal(ids(toks), want[i].Tokens) {
					t.Errorf("%s %+v: %v, from scratch %v", what, params[i], ids(toks), want[i].Tokens)
				}
			}

			cache := open(64 << 20)
			cfg := scheduler.Config{PromptCache: cache, IdleSequences: -1, PrefillChunk: 40}
			s, stop := startStoppable(m, cfg)
			// Speculative, so that the prompt's blocks carry MTP state.
			first, _ := s.Submit(ctx, scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 3, Speculative: true}})
			collect(t, first)
			var streams []*scheduler.Stream
			for _, p := range params {
				st, err := s.Submit(ctx, scheduler.Request{Prompt: turn, Params: p})
				if err != nil {
					t.Fatal(err)
				}
				streams = append(streams, st)
			}
			batched := false
			for i, st := range streams {
				toks, res := collect(t, st)
				check("batched, from memory", i, toks, res)
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
			cfg.PromptCache = cache
			s, stop = startStoppable(m, cfg)
			defer stop()
			for i, p := range params {
				st, _ := s.Submit(ctx, scheduler.Request{Prompt: turn, Params: p})
				toks, res := collect(t, st)
				check("alone, from disk", i, toks, res)
				if res.DraftsProposed != want[i].DraftsProposed || res.DraftsAccepted != want[i].DraftsAccepted {
					t.Errorf("alone, from disk %+v: drafts %d/%d, from scratch %d/%d", p, res.DraftsAccepted, res.DraftsProposed, want[i].DraftsAccepted, want[i].DraftsProposed)
				}
			}
			if st := cache.Stats(); st.Disk.HitTokens == 0 {
				t.Errorf("nothing restored from disk: %+v", st)
			}
		})
	}
}

// startStoppable runs a scheduler until stop is called.
func startStoppable(m *model.Model, cfg scheduler.Config) (*scheduler.Scheduler, func()) {
	s := scheduler.New(m, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	return s, func() { cancel(); <-done }
}
