package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/fixturemodel"
	"github.com/spoolhq/spool/internal/fixtures"
)

func openMini(t testing.TB) *model.Model {
	t.Helper()
	return fixturemodel.Shared(t, "glm52-mini").Model
}

func prompts(t testing.TB) [][]int {
	refs, _ := fixtures.LoadRefs(t, "glm52-mini")
	var out [][]int
	for _, c := range refs.Cases {
		out = append(out, c.PromptIDs)
	}
	return out
}

// start runs a scheduler until the test ends.
func start(t *testing.T, m *model.Model, cfg scheduler.Config) *scheduler.Scheduler {
	t.Helper()
	s, stop := startStoppable(m, cfg)
	t.Cleanup(stop)
	return s
}

// collect reads a stream to the end.
func collect(t *testing.T, st *scheduler.Stream) ([]scheduler.Token, *scheduler.Result) {
	t.Helper()
	var toks []scheduler.Token
	for {
		got, res, err := st.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, got...)
		if res != nil {
			return toks, res
		}
	}
}

func ids(toks []scheduler.Token) []int {
	out := make([]int, len(toks))
	for i, t := range toks {
		out[i] = t.ID
	}
	return out
}

var samplings = []generate.Sampling{
	{},
	{Temperature: 0.8, TopP: 0.9, Seed: 7},
	{Temperature: 1.2, TopK: 40, Seed: 99},
}

// TestLoneEqualsGenerate: a request alone in the scheduler gives exactly
// generate.Generate's tokens, with and without MTP speculation.
func TestLoneEqualsGenerate(t *testing.T) {
	m := openMini(t)
	s := start(t, m, scheduler.Config{IdleSequences: -1})
	for pi, prompt := range prompts(t) {
		for _, smp := range samplings {
			for _, spec := range []bool{false, true} {
				p := generate.Params{MaxTokens: 40, Sampling: smp, StopTokens: m.Config().EOSTokenIDs, Speculative: spec}
				want, err := generate.Generate(context.Background(), m, m.NewSequence(0), prompt, p, nil)
				if err != nil {
					t.Fatal(err)
				}
				st, err := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 40, Sampling: smp, StopTokens: m.Config().EOSTokenIDs, Speculative: spec}})
				if err != nil {
					t.Fatal(err)
				}
				toks, res := collect(t, st)
				name := fmt.Sprintf("prompt %d sampling %+v spec %v", pi, smp, spec)
				if !slices.Equal(ids(toks), want.Tokens) || res.FinishReason != want.FinishReason || res.StopToken != want.StopToken {
					t.Errorf("%s: scheduler %v (%s, %d), generate %v (%s, %d)", name, ids(toks), res.FinishReason, res.StopToken, want.Tokens, want.FinishReason, want.StopToken)
				}
				if res.Lane != scheduler.LaneSingle || res.CompletionTokens != len(toks) || res.PromptTokens != len(prompt) {
					t.Errorf("%s: result %+v", name, res)
				}
				if spec && m.HasMTP() && len(toks) > 2 && res.DraftsProposed == 0 {
					t.Errorf("%s: no MTP drafts proposed", name)
				}
			}
		}
	}
}

// TestBatchedEqualsSingle: requests forwarded together give each the
// tokens it gets alone (greedy and seeded sampling).
func TestBatchedEqualsSingle(t *testing.T) {
	m := openMini(t)
	const n = 12
	s := start(t, m, scheduler.Config{MaxBatch: 6, MaxQueue: n, IdleSequences: -1})
	type job struct {
		req  scheduler.Request
		want []int
	}
	var jobs []job
	ps := prompts(t)
	for i := range n {
		prompt := ps[i%len(ps)]
		if i >= len(ps) {
			prompt = slices.Concat(prompt[:len(prompt)-1], []int{40 + i})
		}
		smp := samplings[i%len(samplings)]
		req := scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 24 + i, Sampling: smp, StopTokens: m.Config().EOSTokenIDs, Speculative: i%2 == 0}}
		want, err := generate.Generate(context.Background(), m, m.NewSequence(0), prompt, generate.Params{MaxTokens: req.MaxTokens, Sampling: smp, StopTokens: req.StopTokens}, nil)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job{req, want.Tokens})
	}
	streams := make([]*scheduler.Stream, n)
	for i, j := range jobs {
		st, err := s.Submit(context.Background(), j.req)
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = st
	}
	batched := 0
	for i, st := range streams {
		toks, res := collect(t, st)
		if !slices.Equal(ids(toks), jobs[i].want) {
			t.Errorf("request %d: batched %v, alone %v", i, ids(toks), jobs[i].want)
		}
		if res.Lane == scheduler.LaneBatched {
			batched++
		}
		if res.PeakBatch > 6 {
			t.Errorf("request %d shared a forward with %d requests, more than MaxBatch", i, res.PeakBatch)
		}
	}
	if batched == 0 {
		t.Error("no request was batched")
	}
	// The figures count each request as ended before its caller hears so.
	if st := s.Stats(); st.Requests != n || st.Active != 0 || st.Queued != 0 {
		t.Errorf("stats after the run: %+v", st)
	}
}

func TestQueueFullAndValidation(t *testing.T) {
	m := openMini(t)
	s := scheduler.New(m, scheduler.Config{MaxBatch: 1, MaxQueue: 2}) // not running: nothing is admitted
	prompt := prompts(t)[0]
	for range 2 {
		if _, err := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 1}}); !errors.Is(err, scheduler.ErrQueueFull) {
		t.Errorf("third request: %v, want ErrQueueFull", err)
	}
	vocab := m.Config().VocabSize
	type P = generate.Params
	bad := []scheduler.Request{
		{Params: P{MaxTokens: 1}},
		{Prompt: prompt},
		{Prompt: []int{vocab}, Params: P{MaxTokens: 1}},
		{Prompt: prompt, Params: P{MaxTokens: 1, Sampling: generate.Sampling{TopP: 3}}},
		{Prompt: prompt, Params: P{MaxTokens: 1, PresencePenalty: 2.5}},
		{Prompt: prompt, Params: P{MaxTokens: 1, LogitBias: map[int]float64{vocab: 1}}},
		{Prompt: prompt, Params: P{MaxTokens: 1, LogitBias: map[int]float64{1: 101}}},
		{Prompt: prompt, Params: P{MaxTokens: 1, Logprobs: true, TopLogprobs: 21}},
	}
	s2 := scheduler.New(m, scheduler.Config{ContextLength: 8})
	for i, r := range bad {
		if _, err := s2.Submit(context.Background(), r); err == nil {
			t.Errorf("bad request %d accepted", i)
		}
	}
	var ce *kvcache.ContextError
	if _, err := s2.Submit(context.Background(), scheduler.Request{Prompt: make([]int, 9), Params: generate.Params{MaxTokens: 1}}); !errors.As(err, &ce) {
		t.Errorf("overlong prompt: %v, want a context error", err)
	}
}

// TestQueuedCancelLeavesQueue: a client that gives up while its request
// waits in the queue takes its slot with it. Nothing is admitted (the
// scheduler does not run), so only a cancellation can free a slot; the
// streams end with FinishCancelled, Stats no longer counts them, and new
// requests are taken instead of refused with ErrQueueFull.
func TestQueuedCancelLeavesQueue(t *testing.T) {
	m := openMini(t)
	s := scheduler.New(m, scheduler.Config{MaxBatch: 1, MaxQueue: 4})
	prompt := prompts(t)[0]
	req := scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 1}}
	var streams []*scheduler.Stream
	var cancels []context.CancelFunc
	for range 4 {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := s.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		streams, cancels = append(streams, st), append(cancels, cancel)
	}
	if _, err := s.Submit(context.Background(), req); !errors.Is(err, scheduler.ErrQueueFull) {
		t.Fatalf("fifth request: %v, want ErrQueueFull", err)
	}
	// Three give up: one by its context, two by Cancel.
	cancels[0]()
	streams[1].Cancel()
	streams[2].Cancel()
	for i, st := range streams[:3] {
		if _, res := collect(t, st); res.FinishReason != scheduler.FinishCancelled {
			t.Errorf("stream %d: %+v, want cancelled", i, res)
		}
	}
	if q := s.Stats().Queued; q != 1 {
		t.Errorf("queued after three gave up: %d, want 1", q)
	}
	for i := range 3 {
		if _, err := s.Submit(context.Background(), req); err != nil {
			t.Fatalf("request %d after the others gave up: %v", i, err)
		}
	}
	if _, err := s.Submit(context.Background(), req); !errors.Is(err, scheduler.ErrQueueFull) {
		t.Errorf("a request past the bound again: %v, want ErrQueueFull", err)
	}
	for _, c := range cancels {
		c()
	}
}

// TestCancel: a cancelled stream finishes before its next token and its
// sequence is free for the next request.
func TestCancel(t *testing.T) {
	m := openMini(t)
	s := start(t, m, scheduler.Config{MaxBatch: 1})
	prompt := prompts(t)[0]
	for _, spec := range []bool{false, true} {
		st, err := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 1000, Speculative: spec}})
		if err != nil {
			t.Fatal(err)
		}
		var got int
		for got < 3 {
			toks, res, err := st.Next(context.Background())
			if err != nil || res != nil {
				t.Fatalf("stream ended early: %v %+v", err, res)
			}
			got += len(toks)
		}
		st.Cancel()
		_, res := collect(t, st)
		if res.FinishReason != scheduler.FinishCancelled || res.CompletionTokens >= 1000 {
			t.Errorf("spec %v: after cancel: %+v", spec, res)
		}
	}
	// A context that ends also cancels.
	ctx, cancel := context.WithCancel(context.Background())
	st, err := s.Submit(ctx, scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, res := collect(t, st); res.FinishReason != scheduler.FinishCancelled {
		t.Errorf("context cancel: %+v", res)
	}
	st, err = s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if toks, res := collect(t, st); len(toks) != 3 || res.FinishReason != scheduler.FinishLength {
		t.Errorf("request after cancellations: %d tokens, %+v", len(toks), res)
	}
}

func TestStopsLimitsAndPrefixReuse(t *testing.T) {
	m := openMini(t)
	prompt := prompts(t)[0]
	ref, err := generate.Generate(context.Background(), m, m.NewSequence(0), prompt, generate.Params{MaxTokens: 12}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, m, scheduler.Config{ContextLength: len(prompt) + 3})
	for _, spec := range []bool{false, true} {
		st, _ := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 12, Speculative: spec}})
		if toks, res := collect(t, st); res.FinishReason != scheduler.FinishLength || !slices.Equal(ids(toks), ref.Tokens[:4]) {
			t.Errorf("spec %v: context limit gave %v (%s)", spec, ids(toks), res.FinishReason)
		}
		st, _ = s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 12, StopTokens: []int{ref.Tokens[2]}, Speculative: spec}})
		first := slices.Index(ref.Tokens, ref.Tokens[2])
		if toks, res := collect(t, st); res.FinishReason != scheduler.FinishStop || res.StopToken != ref.Tokens[2] || !slices.Equal(ids(toks), ref.Tokens[:first]) {
			t.Errorf("spec %v: stop token gave %v (%+v)", spec, ids(toks), res)
		}
	}

	// A second turn reuses the first turn's cache.
	s2 := start(t, m, scheduler.Config{})
	st, _ := s2.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 6}})
	first, _ := collect(t, st)
	turn2 := slices.Concat(prompt, ids(first), []int{39, 40})
	fresh, err := generate.Generate(context.Background(), m, m.NewSequence(0), turn2, generate.Params{MaxTokens: 6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, _ = s2.Submit(context.Background(), scheduler.Request{Prompt: turn2, Params: generate.Params{MaxTokens: 6, Speculative: true}})
	toks, res := collect(t, st)
	if res.CachedTokens != len(prompt)+len(first)-1 || !slices.Equal(ids(toks), fresh.Tokens) {
		t.Errorf("second turn: %d cached (want %d), tokens %v, fresh %v", res.CachedTokens, len(prompt)+len(first)-1, ids(toks), fresh.Tokens)
	}
}

// TestShutdown: stopping Run finishes queued requests and refuses new ones.
func TestShutdown(t *testing.T) {
	m := openMini(t)
	s := scheduler.New(m, scheduler.Config{MaxBatch: 1})
	prompt := prompts(t)[0]
	st1, _ := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 100000}})
	st2, _ := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 10}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	// The first request decodes (it was admitted) before Run stops.
	if toks, _, err := st1.Next(context.Background()); err != nil || len(toks) == 0 {
		t.Fatalf("the first request's first read: %d tokens, %v", len(toks), err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v", err)
	}
	for i, st := range []*scheduler.Stream{st1, st2} {
		if _, res := collect(t, st); res.FinishReason != scheduler.FinishCancelled {
			t.Errorf("stream %d after shutdown: %+v", i, res)
		}
	}
	if _, err := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 1}}); !errors.Is(err, scheduler.ErrClosed) {
		t.Errorf("submit after shutdown: %v", err)
	}
}
