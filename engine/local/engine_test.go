package local

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/engine/turn"
	"github.com/spoolhq/spool/internal/fixturemodel"
	"github.com/spoolhq/spool/internal/fixtures"
)

// recorder is an Observer that keeps what it hears.
type recorder struct {
	mu     sync.Mutex
	begun  []string
	ended  map[string]string
	tokens map[string]int
}

func (r *recorder) Begin(_ context.Context, id string, _ int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.begun = append(r.begun, id)
}
func (r *recorder) Prefill(string, scheduler.Progress) {}
func (r *recorder) Tokens(id string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[id] += n
}
func (r *recorder) Output(string, string, string) {}
func (r *recorder) End(id string, _ *scheduler.Result, finish string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ended[id]; !ok {
		r.ended[id] = finish
	}
}

func (r *recorder) finish(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended[id]
}

// newEngine is a local engine on the glm52-mini fixture, its scheduler
// running unless stopped.
func newEngine(t *testing.T, stopped bool, keepAlive time.Duration) (*Engine, *recorder) {
	t.Helper()
	path := fixtures.Path(t, "glm52-mini")
	dir := fixturemodel.Shared(t, "glm52-mini")
	tok, err := tokenizer.Load(filepath.Join(path, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(path)
	if err != nil {
		t.Fatal(err)
	}
	sched := scheduler.New(dir.Model, scheduler.Config{ContextLength: 256})
	if !stopped {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			sched.Run(ctx)
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	rec := &recorder{ended: map[string]string{}, tokens: map[string]int{}}
	e, err := New(Config{ModelID: "glm52-mini", Scheduler: sched, Tokenizer: tok, Template: tmpl, KeepAlive: keepAlive, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	return e, rec
}

func question(extra func(*turn.Request)) *turn.Request {
	r := &turn.Request{Messages: []chat.Message{{Role: "user", Content: "What does the function os.path.join do?"}},
		Sampling: turn.Sampling{Temperature: new(0.0)}, MaxTokens: new(6)}
	if extra != nil {
		extra(r)
	}
	return r
}

// TestTurnPieces: a turn's pieces add up to its reply, the last carries
// its end, and the usage counts what the pieces carried.
func TestTurnPieces(t *testing.T) {
	e, rec := newEngine(t, false, time.Minute)
	ctx := context.Background()
	st, err := e.Submit(ctx, question(func(r *turn.Request) { r.ID = "t1" }))
	if err != nil {
		t.Fatal(err)
	}
	var pieces []turn.Piece
	for {
		p, err := st.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, p)
		if p.End != nil {
			break
		}
	}
	if _, err := st.Next(ctx); !errors.Is(err, turn.ErrEnded) {
		t.Errorf("Next after the end: %v, want ErrEnded", err)
	}
	st.Close()
	end := pieces[len(pieces)-1].End
	var tokens int
	for _, p := range pieces {
		tokens += len(p.Tokens)
	}
	if st.ID() != "t1" || end.Model != "glm52-mini" || end.Finish != turn.FinishLength || end.Usage.CompletionTokens != 6 || tokens != 6 {
		t.Errorf("id %s, end %+v, %d tokens in pieces", st.ID(), end, tokens)
	}
	if end.Usage.PromptTokens != st.PromptTokens() || end.Usage.Engine == nil {
		t.Errorf("usage %+v, prompt %d", end.Usage, st.PromptTokens())
	}
	if rec.finish("t1") != turn.FinishLength || rec.tokens["t1"] != 6 {
		t.Errorf("the observer heard %q and %d tokens", rec.finish("t1"), rec.tokens["t1"])
	}

	// The same turn, collected, gives the same reply.
	st2, err := e.Submit(ctx, question(nil))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := turn.Collect(ctx, st2)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Text != turn.Text(pieces) || rep.End.Finish != turn.FinishLength {
		t.Errorf("collected %q (%s), streamed %q", rep.Text, rep.End.Finish, turn.Text(pieces))
	}
}

// TestTurnContinues: a turn that goes on from a reply's first tokens
// gives the rest of the reply the whole turn gives (greedy).
func TestTurnContinues(t *testing.T) {
	e, _ := newEngine(t, false, time.Minute)
	ctx := context.Background()
	whole, err := e.Submit(ctx, question(nil))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := turn.Collect(ctx, whole)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tokens) != 6 {
		t.Fatalf("the whole reply has %d tokens", len(rep.Tokens))
	}
	var first []int
	for _, tk := range rep.Tokens[:2] {
		first = append(first, tk.ID)
	}
	st, err := e.Submit(ctx, question(func(r *turn.Request) { r.Continue, r.MaxTokens = first, new(4) }))
	if err != nil {
		t.Fatal(err)
	}
	rest, err := turn.Collect(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for i, tk := range rest.Tokens {
		if tk.ID != rep.Tokens[2+i].ID {
			t.Fatalf("token %d of the rest is %d, the whole reply's %d", i, tk.ID, rep.Tokens[2+i].ID)
		}
	}
	if len(rest.Tokens) != 4 || !strings.HasSuffix(rep.Text, rest.Text) || rest.Text == "" {
		t.Errorf("the rest %q (%d tokens), the whole %q", rest.Text, len(rest.Tokens), rep.Text)
	}
	if _, err := e.Submit(ctx, question(func(r *turn.Request) { r.Continue = []int{-1} })); err == nil || turn.Error(err).Param != "continue" {
		t.Errorf("a continuation outside the vocabulary: %v", err)
	}
}

// TestTurnWaits: while a turn waits (here the scheduler is stopped), the
// stream gives Idle pieces, and closing it cancels the turn.
func TestTurnWaits(t *testing.T) {
	e, rec := newEngine(t, true, time.Millisecond)
	st, err := e.Submit(context.Background(), question(func(r *turn.Request) { r.ID = "w" }))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		p, err := st.Next(context.Background())
		if err != nil || !p.Idle {
			t.Fatalf("a waiting turn gave %+v, %v; want Idle", p, err)
		}
	}
	// A reader's own deadline ends its wait, not the turn.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next with an ended context: %v", err)
	}
	if rec.finish("w") != "" {
		t.Errorf("the turn ended (%s) with its reader's wait", rec.finish("w"))
	}
	st.Close()
	if rec.finish("w") != scheduler.FinishCancelled {
		t.Errorf("closed: the observer heard %q, want cancelled", rec.finish("w"))
	}
	if _, err := st.Next(context.Background()); err == nil {
		t.Error("Next after Close gave no error")
	}
}

// TestTurnRefusals: what needs the model is checked by the engine, with
// typed refusals.
func TestTurnRefusals(t *testing.T) {
	e, _ := newEngine(t, true, time.Minute)
	ctx := context.Background()
	long := question(func(r *turn.Request) { r.Messages[0].Content = repeat("a b ", 300) })
	_, err := e.Submit(ctx, long)
	var ce *turn.ContextError
	if !errors.As(err, &ce) || !ce.AtLeast || ce.Limit != 256 {
		t.Errorf("a prompt over the context: %v", err)
	}
	long.Measure = true
	if _, err := e.Submit(ctx, long); !errors.As(err, &ce) || ce.AtLeast || ce.Prompt <= 256 {
		t.Errorf("measured: %+v", err)
	}
	if n, err := e.CountTokens(ctx, long); err != nil || n != ce.Prompt {
		t.Errorf("counted %d, %v; the refusal said %d", n, err, ce.Prompt)
	}
	// A request's own context (num_ctx) bounds prompt and reply.
	n, err := e.CountTokens(ctx, question(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(ctx, question(func(r *turn.Request) { r.Context = n })); !errors.As(err, &ce) || !ce.Requested || ce.Limit != n {
		t.Errorf("a prompt of %d tokens in a context of %d: %v", n, n, err)
	}
	if _, err := e.Submit(ctx, question(func(r *turn.Request) { r.Format = &turn.Format{Param: "format", Type: turn.JSONObject} })); err == nil || turn.Error(err).Param != "format" {
		t.Errorf("a JSON format without a constrained decoder: %v", err)
	}
	if _, err := e.Submit(ctx, question(func(r *turn.Request) { r.Sampling.MinP = new(2.0) })); err == nil || turn.Error(err).Param != "min_p" {
		t.Errorf("min_p 2: %v", err)
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
