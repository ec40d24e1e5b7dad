package scheduler_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/kernels/gpu"
)

// TestEmbedBatchedWithChats: embeddings queued beside decoding chats are
// the bits generate.Generate gives alone with the same prefill chunk, the
// chats' tokens are unchanged,
// and an embedding neither reuses nor evicts a chat's idle sequence.
func TestEmbedBatchedWithChats(t *testing.T) {
	m := openMini(t)
	ps := prompts(t)
	want := make([][]float32, len(ps))
	for i, prompt := range ps {
		res, err := generate.Generate(context.Background(), m, m.NewSequence(0), prompt, generate.Params{Embed: true, PrefillChunk: 4}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.Embedding
	}
	chatParams := generate.Params{MaxTokens: 30}
	chatWant, err := generate.Generate(context.Background(), m, m.NewSequence(0), ps[0], chatParams, nil)
	if err != nil {
		t.Fatal(err)
	}

	s := start(t, m, scheduler.Config{MaxBatch: 4, IdleSequences: 1, PrefillChunk: 4})
	chat, err := s.Submit(context.Background(), scheduler.Request{Prompt: ps[0], Params: chatParams})
	if err != nil {
		t.Fatal(err)
	}
	// The chat decodes (its first token is out) before the embeddings come.
	if toks, res, err := chat.Next(context.Background()); err != nil || res != nil || len(toks) == 0 {
		t.Fatalf("chat's first read: %d tokens, result %v, err %v", len(toks), res, err)
	}
	streams := make([]*scheduler.Stream, len(ps))
	for i, prompt := range ps {
		if streams[i], err = s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{Embed: true}}); err != nil {
			t.Fatal(err)
		}
	}
	batched := false
	for i, st := range streams {
		toks, res := collect(t, st)
		if res.Err != nil || len(toks) != 0 || res.PromptTokens != len(ps[i]) {
			t.Fatalf("embedding %d: err %v, %d tokens, %d prompt tokens", i, res.Err, len(toks), res.PromptTokens)
		}
		if !slices.Equal(res.Embedding, want[i]) {
			t.Errorf("embedding %d batched (lane %s) differs from alone", i, res.Lane)
		}
		batched = batched || res.Lane == scheduler.LaneBatched
	}
	if !batched {
		t.Error("no embedding shared a forward with the decoding chat: the test did not test batching")
	}
	toks, res := collect(t, chat)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := res.Tokens; !slices.Equal(got, chatWant.Tokens) {
		t.Errorf("chat beside embeddings: %v, alone %v (%d streamed)", got, chatWant.Tokens, len(toks))
	}

	// The chat's sequence stayed idle through more embeddings: its next turn reuses it.
	for _, prompt := range ps {
		st, err := s.Submit(context.Background(), scheduler.Request{Prompt: prompt, Params: generate.Params{Embed: true}})
		if err != nil {
			t.Fatal(err)
		}
		if _, r := collect(t, st); r.CachedTokens != 0 {
			t.Errorf("an embedding reused %d cached tokens", r.CachedTokens)
		}
	}
	next := append(slices.Clone(ps[0]), res.Tokens...)
	st, err := s.Submit(context.Background(), scheduler.Request{Prompt: next, Params: generate.Params{MaxTokens: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, r := collect(t, st); r.CachedTokens < len(ps[0]) {
		t.Errorf("the chat's next turn reused %d tokens, want at least %d: an embedding evicted its sequence", r.CachedTokens, len(ps[0]))
	}
}

// inertBackend accelerates nothing: with a MinRows no forward reaches, it
// only makes the model report a backend.
type inertBackend struct{}

var errInert = errors.New("inert backend called")

func (inertBackend) Keep(...*kernels.Matrix) error { return nil }
func (inertBackend) MatMulMany([]float32, int, []*kernels.Matrix, [][]float32) error {
	return errInert
}
func (inertBackend) MLP([]float32, *gpu.MLP, []float32, int) error { return errInert }
func (inertBackend) MoE([]float32, []float32, int, *gpu.MoE, gpu.Fetch) (gpu.Routes, error) {
	return gpu.Routes{}, errInert
}
func (inertBackend) Attention([]float32, *gpu.Attention) error { return errInert }

// TestEmbedAloneOnAcceleratedModel: with a backend, whether a forward runs
// on it depends on its row count, so an embedding's chunks are forwarded
// alone (never sharing a forward with a decoding chat), and the chat's
// tokens stay those it gives alone.
func TestEmbedAloneOnAcceleratedModel(t *testing.T) {
	d, err := loader.Open(context.Background(), fixtures.Path(t, "glm52-mini"), loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m := d.Model
	var fellBack error
	if err := m.SetBackend(inertBackend{}, model.BackendOptions{MinRows: 1 << 30, OnFallback: func(err error) { fellBack = err }}); err != nil {
		t.Fatal(err)
	}
	ps := prompts(t)
	chatParams := generate.Params{MaxTokens: 30}
	chatWant, err := generate.Generate(context.Background(), m, m.NewSequence(0), ps[0], chatParams, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate.Generate(context.Background(), m, m.NewSequence(0), ps[1], generate.Params{Embed: true, PrefillChunk: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, m, scheduler.Config{MaxBatch: 4, PrefillChunk: 4})
	chat, err := s.Submit(context.Background(), scheduler.Request{Prompt: ps[0], Params: chatParams})
	if err != nil {
		t.Fatal(err)
	}
	if toks, res, err := chat.Next(context.Background()); err != nil || res != nil || len(toks) == 0 {
		t.Fatalf("chat's first read: %d tokens, result %v, err %v", len(toks), res, err)
	}
	st, err := s.Submit(context.Background(), scheduler.Request{Prompt: ps[1], Params: generate.Params{Embed: true}})
	if err != nil {
		t.Fatal(err)
	}
	_, res := collect(t, st)
	if res.Err != nil || res.Lane != scheduler.LaneSingle || res.PeakBatch != 1 {
		t.Errorf("embedding on an accelerated model: err %v, lane %s, peak batch %d; want alone", res.Err, res.Lane, res.PeakBatch)
	}
	if !slices.Equal(res.Embedding, want.Embedding) {
		t.Error("the embedding differs from the same embedding alone")
	}
	_, chatRes := collect(t, chat)
	if chatRes.Err != nil || !slices.Equal(chatRes.Tokens, chatWant.Tokens) {
		t.Errorf("chat beside an embedding: %v (err %v), alone %v", chatRes.Tokens, chatRes.Err, chatWant.Tokens)
	}
	if fellBack != nil {
		t.Fatalf("the inert backend was used: %v", fellBack)
	}
}
