package host

import (
	"context"
	"errors"
	"fmt"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/pull"
	"log"
	"os"
	"path/filepath"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/tokenizer"
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
// opts.
func LoadModel(ctx context.Context, dir string, opts loader.Options) (*LoadedModel, error) {
	lm, err := OpenModel(dir)
	if err != nil {
		return nil, err
	}
	if err := lm.Load(ctx, opts); err != nil {
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

// Load reads the weights; it closes the model directory on error.
func (lm *LoadedModel) Load(ctx context.Context, opts loader.Options) error {
	if err := lm.Dir.Load(ctx, opts); err != nil {
		lm.Dir.Close()
		return err
	}
	return nil
}

// Close closes the model directory and what was loaded from it.
func (lm *LoadedModel) Close() error { return lm.Dir.Close() }

// StreamedExperts builds the streamed expert tier the plan sizes, keeping
// the usage history at usage ("" for none), pinning the most used experts
// and re-pinning live.
func StreamedExperts(p *plan.Plan, usage string) func(context.Context, *container.Container, *config.Config, []int) (experts.Source, error) {
	return func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
		// Half the cache is pinned: from the usage history when there
		// is one, else learned live; re-pinning keeps the pins following
		// the session.
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
			if r, err := pull.RepairerFor(c, cfg, env); err == nil && r != nil {
				opts.Repairer = r
			}
		}
		return StreamedWith(opts)(ctx, c, cfg, layers)
	}
}

// StreamedWith builds a streamed expert tier with opts, for a loader that
// sets the tier up itself (the benchmark harnesses); StreamedExperts is
// the engine's. The loaded tier is the loader.Dir's Experts (see
// Streamed); on an error nothing of it stays open.
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

// Engine is a loaded model with its memory plan, its streamed expert tier,
// its prompt cache and the scheduler that serves it: what the app's host
// serves and what spool bench prompt-cache measures, built the same way
// for both.
type Engine struct {
	Model       *LoadedModel
	Plan        *plan.Plan
	Experts     *experts.Streamed
	PromptCache *promptcache.Cache // nil with the prompt cache off
	GPU         *GPU               // prefill's device, or why there is none
	Scheduler   *scheduler.Scheduler
}

// Open checks every file and plans the memory for cfg before any
// weight is read, then loads the model with the streamed expert tier (its
// telemetry feeds the heat map and its usage history pins the hot
// experts), opens the prompt cache and builds the scheduler (not yet
// running). progress, when set, hears the loading steps.
func Open(ctx context.Context, cfg Config, progress func(detail string, fraction float64)) (*Engine, error) {
	if progress == nil {
		progress = func(string, float64) {}
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	gpuMode, err := CheckGPUMode(cfg.GPU)
	if err != nil {
		return nil, err
	}
	lm, err := OpenModel(cfg.ModelDir)
	if err != nil {
		return nil, err
	}
	g := OpenGPU(gpuMode, log.Writer())
	p, err := g.Plan(func(dev *plan.GPUDevice) (*plan.Plan, error) { return PlanFor(lm.Dir, cfg, dev) })
	if err != nil {
		g.Close()
		lm.Close()
		return nil, err
	}
	// The weights' fingerprint keys the usage history and the prompt
	// cache: read once for a model outside the Hugging Face cache.
	progress("fingerprinting the weights", 0.1)
	usage, err := UsageFile(ctx, lm.Dir, cfg.UsageDir)
	if err != nil {
		g.Close()
		lm.Close()
		return nil, err
	}
	progress("loading weights", 0.2)
	SetMemoryLimit(p)
	err = lm.Load(ctx, loader.Options{
		Model:   PlannedModel(p, model.Options{DisableMTP: cfg.NoMTP, DisableDSA: cfg.NoDSA}),
		Experts: StreamedExperts(p, usage),
	})
	if err != nil {
		g.Close()
		return nil, err
	}
	e := &Engine{Model: lm, Plan: p, Experts: Streamed(lm.Dir), GPU: g}
	// Restores read through the expert tier's pool.
	if e.PromptCache, err = cfg.PromptCache.Open(ctx, lm.Dir, p, e.Experts.ReadPool()); err != nil {
		g.Close()
		lm.Close()
		return nil, err
	}
	g.Attach(lm.Dir.Model, p)
	e.Scheduler = scheduler.New(lm.Dir.Model, scheduler.Config{
		MaxBatch: cfg.MaxBatch, MaxQueue: cfg.MaxQueue, ContextLength: p.Context, PrefillChunk: p.PrefillSegment,
		IdleSequences: cfg.IdleSequences, PromptCache: e.PromptCache,
	})
	return e, nil
}

// Close releases the engine once its scheduler has stopped: the prompt
// cache first (it writes the blocks only in memory to disk, reading
// nothing more through the expert tier's pool), then the GPU device
// (before the model's memory goes), then the model.
func (e *Engine) Close() error {
	var err error
	if e.PromptCache != nil {
		err = e.PromptCache.Close()
	}
	e.GPU.Close()
	return errors.Join(err, e.Model.Close())
}
