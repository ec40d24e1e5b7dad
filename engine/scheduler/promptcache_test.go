package scheduler_test

import (
	"context"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/fixturemodel"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestPromptCacheExact: through the scheduler, on both fixtures and the
// demo model, with DSA active (the long reference prompt) and MTP
// speculation on and off, greedy and seeded: the next turn of a prompt
// whose blocks the prompt cache holds gives exactly the tokens of a run
// from scratch, batched with other requests (blocks from memory) and alone
// after a restart (blocks from disk; with speculation the drafts are those
// of a run from scratch, so the MTP state came back too). No idle sequence
// is kept, so every reused token comes from the cache.
func TestPromptCacheExact(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"glm52-tiny", "glm52-mini", fixtures.DemoName} {
		t.Run(name, func(t *testing.T) {
			d, err := loader.Open(ctx, fixtures.ModelDir(t, name), loader.Options{})
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
			id, err := promptcache.IdentityOf(context.Background(), d, "test", fingerprint.Options{})
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
			// Drafts in every lone step, as Generate without a gate: the
			// drafts are compared with its.
			cfg := scheduler.Config{PromptCache: cache, IdleSequences: -1, PrefillChunk: 40, Drafting: draftgate.Config{Always: true}}
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

// fullDisk is a file system whose writes fail with ENOSPC once budget
// bytes have been written.
type fullDisk struct {
	promptcache.OS
	mu     sync.Mutex
	budget int64
}

type fullDiskFile struct {
	promptcache.File
	fs *fullDisk
}

func (f *fullDisk) CreateTemp(dir, pattern string) (promptcache.File, error) {
	file, err := f.OS.CreateTemp(dir, pattern)
	return &fullDiskFile{File: file, fs: f}, err
}

func (f *fullDiskFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if int64(len(p)) > f.fs.budget {
		return 0, syscall.ENOSPC
	}
	f.fs.budget -= int64(len(p))
	return f.File.Write(p)
}

// TestPromptCacheFullDisk: with a memory tier of a few blocks (so blocks
// spill while requests run), a disk tier capped at a dozen blocks, and a
// disk that fills up, every request still gives the tokens of a run
// without a cache, and the disk tier stays within its cap.
func TestPromptCacheFullDisk(t *testing.T) {
	ctx := context.Background()
	m := openMini(t)
	prompt := prompts(t)[2]
	id, err := promptcache.IdentityOf(context.Background(), fixturemodel.Shared(t, "glm52-mini"), "test", fingerprint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := promptcache.Options{Identity: id, Dir: t.TempDir(), DiskBytes: 1 << 30, MinFreeBytes: -1, Logger: slog.New(slog.DiscardHandler)}
	fp, err := promptcache.Footprint(o)
	if err != nil {
		t.Fatal(err)
	}
	o.MemoryBytes, o.DiskBytes = 3*fp.BlockBytes, 6*(fp.BlockBytes+4096)
	disk := &fullDisk{budget: 9 * fp.BlockBytes}
	o.FS = disk
	cache, err := promptcache.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	s := start(t, m, scheduler.Config{PromptCache: cache, IdleSequences: -1, PrefillChunk: 24})
	var streams []*scheduler.Stream
	var want [][]int
	for i := range 6 {
		turn := slices.Concat(prompt[:len(prompt)-i*7], []int{39 + i, 40})
		p := generate.Params{MaxTokens: 8, Speculative: i%2 == 0, Sampling: generate.Sampling{Temperature: 0.8, Seed: uint64(i)}}
		ref, err := generate.Generate(ctx, m, m.NewSequence(0), turn, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ref.Tokens)
		st, err := s.Submit(ctx, scheduler.Request{Prompt: turn, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	for i, st := range streams {
		toks, res := collect(t, st)
		if res.Err != nil || !slices.Equal(ids(toks), want[i]) {
			t.Errorf("request %d: %v (%v), want %v", i, ids(toks), res.Err, want[i])
		}
	}
	cache.Flush(ctx) // fails while the disk is full: only cache is lost
	st := cache.Stats()
	if st.DiskFull == 0 || st.Disk.Evictions == 0 || st.Hits == 0 || st.Disk.Bytes > o.DiskBytes {
		t.Errorf("stats %+v", st)
	}
	var used int64
	filepath.Walk(o.Dir, func(_ string, info fs.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			used += info.Size()
		}
		return nil
	})
	if used > o.DiskBytes {
		t.Errorf("the disk tier holds %d bytes, over its cap %d", used, o.DiskBytes)
	}
}
