package main

import (
	"context"
	"errors"
	"fmt"
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

// loadedModel is a model directory opened for text generation: the model,
// its tokenizer and its chat template.
type loadedModel struct {
	dir       *loader.Dir
	tokenizer *tokenizer.Tokenizer
	template  *chat.Template // nil when the model ships no chat template
}

// defaultModelDir is where the demo model lives relative to the repository
// root or the executable's directory.
const defaultModelDir = "assets/models/glm52-mini"

// resolveModelDir picks --model, then $SPOOL_MODEL, then the demo model.
func resolveModelDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("SPOOL_MODEL"); env != "" {
		return env, nil
	}
	candidates := []string{defaultModelDir}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates,
			filepath.Join(filepath.Dir(exe), "..", defaultModelDir),
			filepath.Join(filepath.Dir(exe), "..", "Resources", "models", "glm52-mini"))
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, "config.json")); err == nil {
			return c, nil
		}
	}
	return "", errors.New("no model directory: pass --model DIR or set SPOOL_MODEL")
}

func loadModel(ctx context.Context, dir string, opts loader.Options) (*loadedModel, error) {
	lm, err := openModel(dir)
	if err != nil {
		return nil, err
	}
	if err := lm.load(ctx, opts); err != nil {
		return nil, err
	}
	return lm, nil
}

// openModel opens every file a run of the model in dir needs before any
// weight is read: the config, every shard's header (validated against the
// config), the tokenizer and the chat template. Plan from lm.dir, then load.
func openModel(dir string) (*loadedModel, error) {
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
	lm := &loadedModel{dir: d, tokenizer: tok}
	if lm.template, err = chat.LoadTemplate(dir); err != nil && !errors.Is(err, chat.ErrNoTemplate) {
		d.Close()
		return nil, err
	}
	return lm, nil
}

// load reads the weights; it closes the model directory on error.
func (lm *loadedModel) load(ctx context.Context, opts loader.Options) error {
	if err := lm.dir.Load(ctx, opts); err != nil {
		lm.dir.Close()
		return err
	}
	return nil
}

func (lm *loadedModel) Close() error { return lm.dir.Close() }

// streamedExperts builds the streamed expert tier the plan sizes, keeping
// the usage history at usage ("" for none), pinning the most used experts
// and re-pinning live.
func streamedExperts(p *plan.Plan, usage string) func(context.Context, *container.Container, *config.Config, []int) (experts.Source, error) {
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
		s, err := experts.NewStreamed(ctx, c, cfg, layers, opts)
		if err != nil {
			return nil, err // not a nil *Streamed inside the interface
		}
		return s, nil
	}
}

// engine is a loaded model with its memory plan, its streamed expert tier,
// its prompt cache and the scheduler that serves it: what the host serves
// and what spool bench prompt-cache measures, built the same way for both.
type engine struct {
	lm    *loadedModel
	plan  *plan.Plan
	src   *experts.Streamed
	cache *promptcache.Cache // nil with the prompt cache off
	gpu   *gpuBackend        // prefill's device, or why there is none
	sched *scheduler.Scheduler
}

// openEngine checks every file and plans the memory for cfg before any
// weight is read, then loads the model with the streamed expert tier (its
// telemetry feeds the heat map and its usage history pins the hot
// experts), opens the prompt cache and builds the scheduler (not yet
// running). progress, when set, hears the loading steps.
func openEngine(ctx context.Context, cfg hostConfig, progress func(detail string, fraction float64)) (*engine, error) {
	if progress == nil {
		progress = func(string, float64) {}
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = defaultMaxBatch
	}
	gpuMode, err := (&gpuFlag{mode: cfg.GPU}).check()
	if err != nil {
		return nil, err
	}
	lm, err := openModel(cfg.ModelDir)
	if err != nil {
		return nil, err
	}
	g := openGPU(gpuMode, log.Writer())
	p, err := g.plan(func(dev *plan.GPUDevice) (*plan.Plan, error) { return hostPlan(lm.dir, cfg, dev) })
	if err != nil {
		g.Close()
		lm.Close()
		return nil, err
	}
	// The weights' fingerprint keys the usage history and the prompt
	// cache: read once for a model outside the Hugging Face cache.
	progress("fingerprinting the weights", 0.1)
	usage, err := usageFile(ctx, lm.dir, cfg.UsageDir)
	if err != nil {
		g.Close()
		lm.Close()
		return nil, err
	}
	progress("loading weights", 0.2)
	setMemoryLimit(p)
	err = lm.load(ctx, loader.Options{
		Model:   plannedModel(p, model.Options{DisableMTP: cfg.NoMTP, DisableDSA: cfg.NoDSA}),
		Experts: streamedExperts(p, usage),
	})
	if err != nil {
		g.Close()
		return nil, err
	}
	e := &engine{lm: lm, plan: p, src: lm.dir.Experts.(*experts.Streamed), gpu: g}
	// Restores read through the expert tier's pool.
	if e.cache, err = cfg.PromptCache.open(ctx, lm.dir, p, e.src.ReadPool()); err != nil {
		g.Close()
		lm.Close()
		return nil, err
	}
	g.attach(lm.dir.Model, p)
	e.sched = scheduler.New(lm.dir.Model, scheduler.Config{
		MaxBatch: cfg.MaxBatch, MaxQueue: cfg.MaxQueue, ContextLength: p.Context, PrefillChunk: p.PrefillChunk,
		IdleSequences: cfg.IdleSequences, PromptCache: e.cache,
	})
	return e, nil
}

// Close releases the engine once its scheduler has stopped: the prompt
// cache first (it writes the blocks only in memory to disk, reading
// nothing more through the expert tier's pool), then the GPU device
// (before the model's memory goes), then the model.
func (e *engine) Close() error {
	var err error
	if e.cache != nil {
		err = e.cache.Close()
	}
	e.gpu.Close()
	return errors.Join(err, e.lm.Close())
}
