package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/pressure"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/engine/pull"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/native/diskio"
)

// LoadedModel is a model directory opened for text generation: the model,
// its tokenizer and its chat template.
type LoadedModel struct {
	Dir       *loader.Dir
	Tokenizer *tokenizer.Tokenizer
	Template  *chat.Template // nil when the model ships no chat template
}

// DefaultModelDir is where the demo model lives relative to the repository
// root or the executable's directory.
const DefaultModelDir = "assets/models/glm52-demo"

// ResolveModelDir picks --model, then $SPOOL_MODEL, then the demo model.
func ResolveModelDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("SPOOL_MODEL"); env != "" {
		return env, nil
	}
	candidates := []string{DefaultModelDir}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates,
			filepath.Join(filepath.Dir(exe), "..", DefaultModelDir),
			filepath.Join(filepath.Dir(exe), "..", "Resources", "models", "glm52-demo"))
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, "config.json")); err == nil {
			return c, nil
		}
	}
	return "", errors.New("no model directory: pass --model DIR or set SPOOL_MODEL")
}

// LoadModel opens the model in dir (OpenModel) and loads its weights with
// opts, without a plan (spool atlas probes the demo model resident).
func LoadModel(ctx context.Context, dir string, opts loader.Options) (*LoadedModel, error) {
	lm, err := OpenModel(dir)
	if err != nil {
		return nil, err
	}
	if err := lm.Dir.Load(ctx, opts); err != nil {
		lm.Close()
		return nil, err
	}
	return lm, nil
}

// OpenModel opens every file a run of the model in dir needs before any
// weight is read: the config, every shard's header (validated against the
// config), the tokenizer and the chat template. Plan from lm.Dir, then load.
func OpenModel(dir string) (*LoadedModel, error) {
	d, err := loader.OpenHeaders(dir)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		d.Close()
		return nil, err
	}
	if tok.VocabSize() > d.Config.VocabSize {
		d.Close()
		return nil, fmt.Errorf("tokenizer has %d ids but the model's vocabulary is %d", tok.VocabSize(), d.Config.VocabSize)
	}
	lm := &LoadedModel{Dir: d, Tokenizer: tok}
	if lm.Template, err = chat.LoadTemplate(dir); err != nil && !errors.Is(err, chat.ErrNoTemplate) {
		d.Close()
		return nil, err
	}
	return lm, nil
}

// Close closes the model directory and what was loaded from it.
func (lm *LoadedModel) Close() error { return lm.Dir.Close() }

// StreamedWith builds a streamed expert tier with opts for the loader.
// The loaded tier is the loader.Dir's Experts (see Streamed); on an error
// nothing of it stays open.
func StreamedWith(opts experts.StreamOptions) func(context.Context, *container.Container, *config.Config, []int) (experts.Source, error) {
	return func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
		s, err := experts.NewStreamed(ctx, c, cfg, layers, opts)
		if err != nil {
			return nil, err // not a nil *Streamed inside the interface
		}
		return s, nil
	}
}

// Streamed is the streamed expert tier d was loaded with, nil when its
// experts are resident.
func Streamed(d *loader.Dir) *experts.Streamed {
	s, _ := d.Experts.(*experts.Streamed)
	return s
}

// Engine is an open engine: a loaded model with its memory plan, its
// expert tier, its prompt cache, its GPU and the scheduler that serves it,
// built the same way for spool run, serve and app and every benchmark leg.
type Engine struct {
	Model *LoadedModel
	Plan  *plan.Plan
	// Experts is the streamed expert tier, nil when the experts are
	// resident (Config.ResidentWhenCached).
	Experts     *experts.Streamed
	PromptCache *promptcache.Cache // nil with the prompt cache off
	GPU         *GPU               // prefill's device, or why there is none
	// Scheduler serves requests (not yet running: its owner runs it); nil
	// with Config.NoScheduler.
	Scheduler *scheduler.Scheduler
	// Pressure gives the caches' memory back under pressure; nil unless
	// Config.WatchPressure.
	Pressure *pressure.Governor

	closers cleanups
}

// Open checks every file and plans the memory for cfg before any weight is
// read, then loads the model with its expert tier (streamed: its telemetry
// feeds the heat map and its usage history pins the hot experts), opens
// the prompt cache and the GPU, and builds the scheduler (not yet
// running). progress, when set, hears the loading steps. What it opens is
// closed, in reverse, by Close, or at once when it fails.
func Open(ctx context.Context, cfg Config, progress func(detail string, fraction float64)) (_ *Engine, err error) {
	if progress == nil {
		progress = func(string, float64) {}
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = scheduler.DefaultMaxBatch
	}
	gpuMode, err := CheckGPUMode(cfg.GPU)
	if err != nil {
		return nil, err
	}
	e := &Engine{}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.Model, err = OpenModel(cfg.ModelDir); err != nil {
		return nil, err
	}
	e.closers.push(e.Model.Close)
	e.GPU = openGPU(gpuMode, cfg)
	e.closers.push(e.GPU.close) // after the model's last forward, before its memory goes
	if e.Plan, err = e.GPU.Plan(func(dev *plan.GPUDevice) (*plan.Plan, error) { return PlanFor(e.Model.Dir, cfg, dev) }); err != nil {
		return nil, err
	}
	if cfg.Check != nil {
		if err := cfg.Check(e.Model, e.Plan); err != nil {
			return nil, err
		}
	}
	opts := loader.Options{Model: PlannedModel(e.Plan, model.Options{DisableMTP: cfg.NoMTP, DisableDSA: cfg.NoDSA, ComputeAllKeys: cfg.ComputeAllKeys})}
	if !cfg.ResidentWhenCached || !e.Plan.AllExpertsCached() {
		so, err := streamOptions(ctx, cfg, e.Model.Dir, e.Plan, progress)
		if err != nil {
			return nil, err
		}
		opts.Experts = StreamedWith(so)
	}
	progress("loading weights", 0.2)
	SetMemoryLimit(e.Plan)
	if err := e.Model.Dir.Load(ctx, opts); err != nil {
		return nil, err
	}
	e.Experts = Streamed(e.Model.Dir)
	// Restores read through the expert tier's pool.
	var pool *diskio.ReadPool
	if e.Experts != nil {
		pool = e.Experts.ReadPool()
	}
	if e.PromptCache, err = cfg.PromptCache.Open(ctx, e.Model.Dir, e.Plan, pool); err != nil {
		return nil, err
	}
	if e.PromptCache != nil {
		// Closing writes the blocks only in memory to disk, reading
		// nothing more through the expert tier's pool.
		e.closers.push(e.PromptCache.Close)
	}
	e.GPU.Attach(e.Model.Dir.Model, e.Plan)
	if cfg.WatchPressure && e.Experts != nil {
		e.Pressure = e.watchPressure(ctx)
	}
	if !cfg.NoScheduler {
		e.Scheduler = scheduler.New(e.Model.Dir.Model, scheduler.Config{
			MaxBatch: cfg.MaxBatch, MaxQueue: cfg.MaxQueue, ContextLength: e.Plan.Context, PrefillChunk: e.Plan.PrefillSegment,
			IdleSequences: cfg.IdleSequences, PromptCache: e.PromptCache,
		})
	}
	return e, nil
}

// streamOptions are the streamed tier's options for plan p: cfg.Stream's,
// or the engine's own (the usage history, half the cache pinned from it,
// re-pinned live).
func streamOptions(ctx context.Context, cfg Config, d *loader.Dir, p *plan.Plan, progress func(string, float64)) (experts.StreamOptions, error) {
	if cfg.Stream != nil {
		return cfg.Stream(p), nil
	}
	// The weights' fingerprint keys the usage history and the prompt
	// cache: read once for a model outside the Hugging Face cache.
	progress("fingerprinting the weights", 0.1)
	usage, err := UsageFile(ctx, d, cfg.UsageDir)
	if err != nil {
		return experts.StreamOptions{}, err
	}
	opts := experts.StreamOptions{
		CacheBytes:     p.ExpertCacheBytes,
		WorkingSlots:   p.WorkingSlots,
		UsagePath:      usage,
		FootprintLimit: p.MemoryLimitBytes,
		PinnedBytes:    p.ExpertCacheBytes / 2,
		RepinEvery:     experts.DefaultRepinEvery,
	}
	if usage != "" {
		if err := os.MkdirAll(filepath.Dir(usage), 0o755); err != nil {
			opts.UsagePath = "" // no history rather than no engine
		}
	}
	// A model downloaded from the hub repairs a damaged expert from it.
	if env, err := hub.EnvFromOS(); err == nil {
		if r, err := pull.RepairerFor(d.Container, d.Config, env); err == nil && r != nil {
			opts.Repairer = r
		}
	}
	return opts, nil
}

// Close releases the engine once its scheduler has stopped, in the
// reverse of the order Open opened it: the pressure watcher, the prompt
// cache (it writes the blocks only in memory to disk), the GPU device
// (before the model's memory goes), then the model. It is safe to call
// more than once.
func (e *Engine) Close() error { return e.closers.unwind() }

// cleanups is a stack of releases, run last first.
type cleanups []func() error

func (c *cleanups) push(f func() error) { *c = append(*c, f) }

// unwind runs the releases, last pushed first, and empties the stack.
func (c *cleanups) unwind() error {
	var errs []error
	for len(*c) > 0 {
		f := (*c)[len(*c)-1]
		*c = (*c)[:len(*c)-1]
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}
