package scheduler_test

import (
	"context"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/fixtures"
)

// openStreamed loads a fixture model whose routed experts stream from disk
// through a cache of two slots per layer, with runners planned for rows.
func openStreamed(t *testing.T, name string, rows int) *model.Model {
	t.Helper()
	d, err := loader.Open(context.Background(), fixtures.ModelDir(t, name), loader.Options{
		Model: model.Options{Limits: model.Limits{Rows: rows, LogitRows: 4}},
		Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			var row int64
			for _, l := range layers {
				loc, err := c.Expert(l, 0, cfg)
				if err != nil {
					return nil, err
				}
				row += 2 * loc.Bytes()
			}
			return experts.NewStreamed(ctx, c, cfg, layers, experts.StreamOptions{CacheBytes: 2 * row})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.Model
}

// TestLongPromptsEveryPath: on each fixture's and the demo model's long
// prompt (past index_topk) and two variants, prefilled in chunks shorter
// than the prompt, the tokens of the resident model alone are those of
// streamed experts, of MTP speculation, and of requests batched in the
// scheduler (greedy and seeded sampling).
func TestLongPromptsEveryPath(t *testing.T) {
	for _, name := range []string{"glm52-tiny", "glm52-mini", fixtures.DemoName} {
		t.Run(name, func(t *testing.T) {
			refs, _ := fixtures.LoadRefs(t, name)
			long := refs.Cases[len(refs.Cases)-1].PromptIDs
			chunk := len(long)/3 + 1
			resident := openLimitedModel(t, name, chunk+3)
			streamed := openStreamed(t, name, chunk+3)
			var ps [][]int
			for i := range 3 {
				ps = append(ps, slices.Concat(long[:len(long)-i], []int{40 + i}))
			}
			type job struct {
				prompt []int
				params generate.Params
				want   []int
			}
			var jobs []job
			for i, prompt := range ps {
				p := generate.Params{MaxTokens: 20, Sampling: samplings[i%len(samplings)], PrefillChunk: chunk}
				res, err := generate.Generate(context.Background(), resident, resident.NewSequence(0), prompt, p, nil)
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, job{prompt, p, res.Tokens})
			}
			for _, m := range []*model.Model{resident, streamed} {
				for i, j := range jobs {
					for _, spec := range []bool{false, true} {
						p := j.params
						p.Speculative = spec
						res, err := generate.Generate(context.Background(), m, m.NewSequence(0), j.prompt, p, nil)
						if err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(res.Tokens, j.want) {
							t.Errorf("prompt %d streamed %v speculative %v: %v, want %v", i, m == streamed, spec, res.Tokens, j.want)
						}
						if m == streamed && res.PrefillExpertBytes == 0 {
							t.Errorf("prompt %d: the streamed prefill read no expert bytes", i)
						}
					}
				}
			}
			for _, m := range []*model.Model{resident, streamed} {
				s := start(t, m, generateConfig(chunk))
				var streams []*scheduler.Stream
				for i, j := range jobs {
					p := j.params
					p.Speculative = i == 0
					st, err := s.Submit(context.Background(), scheduler.Request{Prompt: j.prompt, Params: p})
					if err != nil {
						t.Fatal(err)
					}
					streams = append(streams, st)
				}
				batched := 0
				for i, st := range streams {
					toks, res := collect(t, st)
					if !slices.Equal(ids(toks), jobs[i].want) {
						t.Errorf("streamed %v request %d: batched %v, alone %v", m == streamed, i, ids(toks), jobs[i].want)
					}
					if res.Lane == scheduler.LaneBatched {
						batched++
					}
				}
				if batched == 0 {
					t.Error("no request was batched")
				}
				if st := s.Stats(); st.PrefillChunks == 0 || st.PrefillExpertsTouched == 0 || (m == streamed && st.PrefillExpertBytes == 0) {
					t.Errorf("streamed %v: stats %+v", m == streamed, st)
				}
			}
		})
	}
}

func generateConfig(chunk int) scheduler.Config {
	return scheduler.Config{MaxBatch: 3, IdleSequences: -1, PrefillChunk: chunk}
}

// openLimitedModel loads a resident fixture model with runners of rows
// rows.
func openLimitedModel(t *testing.T, name string, rows int) *model.Model {
	t.Helper()
	d, err := loader.Open(context.Background(), fixtures.ModelDir(t, name), loader.Options{Model: model.Options{Limits: model.Limits{Rows: rows, LogitRows: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.Model
}

// TestPrefillProgress: OnPrefill reports the prompt, the reused tokens and
// the tokens cached, at admission and after every layer of every chunk,
// for a request that shares the batch with another.
func TestPrefillProgress(t *testing.T) {
	m := openMini(t)
	s := start(t, m, scheduler.Config{MaxBatch: 2, PrefillChunk: 40})
	ps := prompts(t)
	busy, err := s.Submit(context.Background(), scheduler.Request{Prompt: ps[0], Params: generate.Params{MaxTokens: 30}})
	if err != nil {
		t.Fatal(err)
	}
	var got []scheduler.Progress
	st, err := s.Submit(context.Background(), scheduler.Request{Prompt: ps[2], Params: generate.Params{MaxTokens: 2}, OnPrefill: func(p scheduler.Progress) { got = append(got, p) }})
	if err != nil {
		t.Fatal(err)
	}
	_, res := collect(t, st)
	collect(t, busy)
	layers := m.Config().NumLayers
	chunks := (len(ps[2]) + 39) / 40
	if len(got) != 1+chunks*layers {
		t.Errorf("%d reports, want 1 + %d chunks x %d layers", len(got), chunks, layers)
	}
	for i, p := range got {
		if p.PromptTokens != len(ps[2]) || p.CachedTokens != res.CachedTokens || p.Done < p.CachedTokens || (i > 0 && p.Done < got[i-1].Done) {
			t.Fatalf("report %d: %+v", i, p)
		}
	}
	if got[len(got)-1].Done != len(ps[2]) {
		t.Errorf("last report %+v", got[len(got)-1])
	}
}

// TestSequencesBounded: finished requests' sequences are reused (emptied)
// rather than adding to the MaxBatch sequences the memory plan counts.
func TestSequencesBounded(t *testing.T) {
	m := openMini(t)
	s := start(t, m, scheduler.Config{MaxBatch: 1, IdleSequences: 2})
	ps := prompts(t)
	for round := range 2 {
		for i, p := range append(ps[:len(ps):len(ps)], ps[len(ps)-1]) {
			st, err := s.Submit(context.Background(), scheduler.Request{Prompt: p, Params: generate.Params{MaxTokens: 3}})
			if err != nil {
				t.Fatal(err)
			}
			toks, res := collect(t, st)
			if len(toks) != 3 || res.FinishReason != scheduler.FinishLength {
				t.Fatalf("round %d prompt %d: %d tokens, %+v", round, i, len(toks), res)
			}
		}
	}
	if st := s.Stats(); st.LastRequest.CachedTokens != len(ps[len(ps)-1])-1 {
		t.Errorf("a repeated prompt reused %d tokens, want %d", st.LastRequest.CachedTokens, len(ps[len(ps)-1])-1)
	}
	if n := s.Sequences(); n != 1 {
		t.Errorf("%d sequences hold state, MaxBatch is 1", n)
	}
}

// TestPrefillReadsEachExpertOnce: with experts streamed through a cache of
// two slots per layer, a prompt prefilled in one chunk reads each expert
// it routes to once (a read fills at most one slab slot), while three
// chunks read them again.
func TestPrefillReadsEachExpertOnce(t *testing.T) {
	refs, _ := fixtures.LoadRefs(t, "glm52-mini")
	long := refs.Cases[len(refs.Cases)-1].PromptIDs
	m := openStreamed(t, "glm52-mini", len(long)+8)
	d, err := loader.OpenHeaders(fixtures.Path(t, "glm52-mini"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var widest int64
	for _, l := range model.ExpertLayers(d.Config, false) {
		loc, err := d.Container.Expert(l, 0, d.Config)
		if err != nil {
			t.Fatal(err)
		}
		widest = max(widest, loc.Bytes())
	}
	perExpert := plan.SlotBytes(widest)
	read := func(chunk int) *generate.Result {
		res, err := generate.Generate(context.Background(), m, m.NewSequence(0), long, generate.Params{MaxTokens: 1, PrefillChunk: chunk}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	one, three := read(len(long)), read(len(long)/3+1)
	if one.PrefillChunks != 1 || three.PrefillChunks != 3 {
		t.Fatalf("%d and %d chunks", one.PrefillChunks, three.PrefillChunks)
	}
	if one.PrefillExpertBytes > int64(one.PrefillExpertsTouched)*perExpert {
		t.Errorf("one chunk read %d bytes for %d experts (at most %d each)", one.PrefillExpertBytes, one.PrefillExpertsTouched, perExpert)
	}
	if three.PrefillExpertBytes <= one.PrefillExpertBytes {
		t.Errorf("three chunks read %d bytes, one chunk %d", three.PrefillExpertBytes, one.PrefillExpertBytes)
	}
	t.Logf("one chunk: %d experts, %d bytes; three chunks: %d bytes", one.PrefillExpertsTouched, one.PrefillExpertBytes, three.PrefillExpertBytes)
}
