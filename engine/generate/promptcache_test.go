package generate_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/internal/fixtures"
)

// openCache opens a prompt cache for d with a memory tier of memory bytes
// and a disk tier in dir.
func openCache(t *testing.T, d *loader.Dir, dir string, memory int64) *promptcache.Cache {
	t.Helper()
	id, err := promptcache.IdentityOf(context.Background(), d, "test", fingerprint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := promptcache.New(promptcache.Options{Identity: id, MemoryBytes: memory, Dir: dir, DiskBytes: 1 << 30, MinFreeBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPromptCacheExact: on both fixtures and the demo, with DSA active (the
// long reference prompt, past index_topk) and with and without MTP
// speculation, greedy and seeded sampling, the next turn of a prompt whose
// blocks come from the prompt cache (its memory tier, then its disk tier
// after a restart) gives exactly the tokens of a run from scratch, and with
// speculation the same drafts (the MTP state is restored too).
func TestPromptCacheExact(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"glm52-tiny", "glm52-mini", fixtures.DemoName} {
		t.Run(name, func(t *testing.T) {
			d := openDir(t, name, model.Limits{})
			m := d.Model
			refs, _ := fixtures.LoadRefs(t, name)
			prompt := refs.Cases[len(refs.Cases)-1].PromptIDs
			if len(prompt) <= m.Config().IndexTopK || !m.HasMTP() || !m.HasDSA() {
				t.Fatalf("the long case has %d tokens (index_topk %d), MTP %v, DSA %v", len(prompt), m.Config().IndexTopK, m.HasMTP(), m.HasDSA())
			}
			turn := slices.Concat(prompt, []int{39, 40, 41, 42, 43})
			B := promptcache.DefaultBlockTokens
			for _, spec := range []bool{false, true} {
				for _, sampling := range []generate.Sampling{{}, {Temperature: 0.9, TopP: 0.95, Seed: 11}} {
					p := generate.Params{MaxTokens: 10, Sampling: sampling, Speculative: spec, PrefillChunk: 40}
					want, err := generate.Generate(ctx, m, m.NewSequence(0), turn, p, nil)
					if err != nil {
						t.Fatal(err)
					}
					dir := t.TempDir()
					cp := p
					cp.PromptCache = openCache(t, d, dir, 64<<20)
					if _, err := generate.Generate(ctx, m, m.NewSequence(0), prompt, cp, nil); err != nil {
						t.Fatal(err)
					}
					check := func(tier string, c *promptcache.Cache) {
						t.Helper()
						cp.PromptCache = c
						got, err := generate.Generate(ctx, m, m.NewSequence(0), turn, cp, nil)
						if err != nil {
							t.Fatal(err)
						}
						// The first turn's reply joined the cache as well.
						if got.RestoredTokens < len(prompt)/B*B || got.CachedTokens != got.RestoredTokens {
							t.Errorf("spec %v %+v from %s: %d tokens restored, %d cached; want at least %d", spec, sampling, tier, got.RestoredTokens, got.CachedTokens, len(prompt)/B*B)
						}
						if !slices.Equal(got.Tokens, want.Tokens) {
							t.Errorf("spec %v %+v from %s: %v, from scratch %v", spec, sampling, tier, got.Tokens, want.Tokens)
						}
						if got.DraftsProposed != want.DraftsProposed || got.DraftsAccepted != want.DraftsAccepted {
							t.Errorf("spec %v %+v from %s: drafts %d/%d, from scratch %d/%d", spec, sampling, tier, got.DraftsAccepted, got.DraftsProposed, want.DraftsAccepted, want.DraftsProposed)
						}
					}
					check("memory", cp.PromptCache)
					if err := cp.PromptCache.Close(); err != nil {
						t.Fatal(err)
					}
					disk := openCache(t, d, dir, 0)
					check("disk", disk)
					if st := disk.Stats(); st.Disk.HitTokens == 0 || st.Memory.HitTokens != 0 {
						t.Errorf("after the restart: %+v", st)
					}
				}
			}
		})
	}
}
