package local

import (
	"context"
	"errors"
	"time"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/glm"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/engine/turn"
)

// Config is what the local engine runs on.
type Config struct {
	// ModelID is the served model's id, which refusals name.
	ModelID string
	// Scheduler runs the model; its owner runs it.
	Scheduler *scheduler.Scheduler
	Tokenizer *tokenizer.Tokenizer
	// Template renders conversations; without one only raw prompts run.
	Template *chat.Template
	// Constraints compiles JSON formats; without it a Format is refused.
	Constraints ConstraintCompiler
	// MaxTokens caps a reply (0: the rest of the context).
	MaxTokens int
	// KeepAlive is the wait after which a stream gives an Idle piece
	// (default 10 s).
	KeepAlive time.Duration
	// Observer hears each turn's progress (nil: nobody).
	Observer Observer
	// RenderLimits, when set, replaces chat.DefaultLimits as the base of a
	// render's limits.
	RenderLimits chat.Limits
}

// Observer hears the progress of the engine's turns (and embeddings):
// the live status and the UI's events. Its methods are called from the
// turns' goroutines and the scheduler's (Prefill), and must not block.
type Observer interface {
	// Begin: a turn of prompt tokens was queued; it counts as cancelled
	// when ctx ends before End.
	Begin(ctx context.Context, id string, prompt int)
	// Prefill reports its prompt's progress.
	Prefill(id string, p scheduler.Progress)
	// Tokens: n more tokens were generated; Output the reasoning and text
	// they made.
	Tokens(id string, n int)
	Output(id, reasoning, text string)
	// End: the turn ended (res is nil when the scheduler gave no result).
	End(id string, res *scheduler.Result, finish string)
}

// Engine runs turns on the model in this process: it renders a turn's
// conversation with the model's template, tokenizes and constrains it,
// queues it on the scheduler, and reads the tokens back as pieces. It is
// a turn.Engine and a turn.Counter; its methods are safe for concurrent
// use.
type Engine struct {
	cfg       Config
	sched     *scheduler.Scheduler
	tok       *tokenizer.Tokenizer
	observe   Observer
	toolVocab *glm.ToolVocab
	// tokenBytes is the length of the tokenizer's longest token.
	tokenBytes int
}

// New returns the engine of cfg.
func New(cfg Config) (*Engine, error) {
	if cfg.Scheduler == nil || cfg.Tokenizer == nil {
		return nil, errors.New("local: the engine needs a scheduler and a tokenizer")
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 10 * time.Second
	}
	if cfg.ModelID == "" {
		cfg.ModelID = "spool"
	}
	e := &Engine{cfg: cfg, sched: cfg.Scheduler, tok: cfg.Tokenizer, observe: cfg.Observer,
		toolVocab: glm.NewToolVocab(cfg.Tokenizer, cfg.Scheduler.Model().Config().EOSTokenIDs), tokenBytes: maxTokenBytes(cfg.Tokenizer)}
	if e.observe == nil {
		e.observe = nobody{}
	}
	return e, nil
}

// ModelID is the served model's id.
func (e *Engine) ModelID() string { return e.cfg.ModelID }

// Scheduler is the scheduler the engine queues on.
func (e *Engine) Scheduler() *scheduler.Scheduler { return e.sched }

// Tokenizer is the model's tokenizer.
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

// Template is the model's chat template (nil: none).
func (e *Engine) Template() *chat.Template { return e.cfg.Template }

// ModelConfig is the model's configuration.
func (e *Engine) ModelConfig() *config.Config { return e.sched.Model().Config() }

// Context is each turn's context: its prompt and reply together
// (turn.Sizer).
func (e *Engine) Context() int { return e.sched.Config().ContextLength }

// MaxOutput is the most tokens one reply may have.
func (e *Engine) MaxOutput() int {
	if e.cfg.MaxTokens > 0 {
		return min(e.Context(), e.cfg.MaxTokens)
	}
	return e.Context()
}

// Constrained reports whether JSON formats can be enforced.
func (e *Engine) Constrained() bool { return e.cfg.Constraints != nil }

// Thinking reports whether the template has a thinking switch
// (enable_thinking).
func (e *Engine) Thinking() bool {
	return e.cfg.Template != nil && containsThinking(e.cfg.Template.Source())
}

// Submit starts a turn (turn.Engine).
func (e *Engine) Submit(ctx context.Context, req *turn.Request) (turn.Stream, error) {
	st, err := e.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Start starts a turn, as Submit does, and returns its stream.
func (e *Engine) Start(ctx context.Context, req *turn.Request) (*Stream, error) {
	p, err := e.prepare(ctx, req, false)
	if err != nil {
		return nil, err
	}
	return e.start(ctx, p)
}

// CountTokens counts a turn's prompt without running it (turn.Counter).
func (e *Engine) CountTokens(ctx context.Context, req *turn.Request) (int, error) {
	prompt, _, err := e.Prompt(ctx, req)
	return len(prompt), err
}

// Prompt is the prompt a turn of req would run with, and how its reply
// would be read; a prompt over the context is counted (up to a few
// contexts), not refused.
func (e *Engine) Prompt(ctx context.Context, req *turn.Request) ([]int, glm.Options, error) {
	p, err := e.prepare(ctx, req, true)
	if err != nil {
		return nil, glm.Options{}, err
	}
	return p.prompt, p.parse, nil
}

// submit queues a prepared request on the scheduler; the observer
// follows it from here.
func (e *Engine) submit(ctx context.Context, id string, sreq scheduler.Request) (*scheduler.Stream, error) {
	e.observe.Begin(ctx, id, len(sreq.Prompt))
	sreq.OnPrefill = func(p scheduler.Progress) { e.observe.Prefill(id, p) }
	st, err := e.sched.Submit(ctx, sreq)
	if err != nil {
		e.observe.End(id, nil, scheduler.FinishError)
		return nil, schedulerError(err)
	}
	return st, nil
}

// nobody is the Observer of an engine nobody watches.
type nobody struct{}

func (nobody) Begin(context.Context, string, int)    {}
func (nobody) Prefill(string, scheduler.Progress)    {}
func (nobody) Tokens(string, int)                    {}
func (nobody) Output(string, string, string)         {}
func (nobody) End(string, *scheduler.Result, string) {}
