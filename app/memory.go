package main

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/native/sysinfo"
)

// Memory planning for the commands that load a model (run, serve, app):
// the --memory and --expert-cache flags, the plan of an opened model (with
// its prompt cache), and what the plan sizes at load (the forwards' limits,
// the Go memory limit).

// planOpened plans running the model whose headers d holds open (before any
// weight is read) with the --memory and --expert-cache flags m; it returns
// the plan, or a *plan.FitError carrying the table and a suggestion when
// not even one expert cache slot per layer fits. spool run calls it before
// loading. gpu is the device prefill runs on (nil: the CPU).
func planOpened(d *loader.Dir, m *memoryFlags, pc promptCacheSetup, context, sequences int, gpu *plan.GPUDevice) (*plan.Plan, error) {
	w, err := plan.FromContainer(d.Container, d.Config, d.Summary)
	if err != nil {
		return nil, err
	}
	return planWeights(d.Config, w, m, pc, context, sequences, gpu)
}

func planWeights(cfg *config.Config, w plan.Weights, m *memoryFlags, pc promptCacheSetup, context, sequences int, gpu *plan.GPUDevice) (*plan.Plan, error) {
	opts, err := m.options()
	if err != nil {
		return nil, err
	}
	opts.Context, opts.Sequences, opts.GPU = context, sequences, gpu
	if opts.PromptCache, err = pc.planMemory(cfg, w); err != nil {
		return nil, err
	}
	p, err := plan.New(cfg, w, opts)
	if err != nil {
		return nil, err
	}
	return p, p.Err()
}

// memoryFlags are the --memory and --expert-cache flags shared by fit, run
// and serve.
type memoryFlags struct {
	memory      string
	expertCache string
}

// register adds --memory and --expert-cache to fs.
func (m *memoryFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&m.memory, "memory", "", "memory budget, OS reserve included, e.g. 32GiB or 24GB (default: the machine's memory)")
	fs.StringVar(&m.expertCache, "expert-cache", "", "LRU + pinned expert slot memory beyond the working bank, e.g. 8GiB (default: what the plan leaves)")
}

// options turns the flags into plan options; an unset --memory asks the
// machine.
func (m *memoryFlags) options() (plan.Options, error) {
	var o plan.Options
	var err error
	if m.memory != "" {
		if o.Memory, err = plan.ParseSize(m.memory); err != nil {
			return o, fmt.Errorf("--memory: %w", err)
		}
	}
	if m.expertCache != "" {
		if o.ExpertCache, err = plan.ParseSize(m.expertCache); err != nil {
			return o, fmt.Errorf("--expert-cache: %w", err)
		}
	}
	o.MachineMemory = machineMemory
	o.Threads = runtime.GOMAXPROCS(0)
	return o, nil
}

// machineMemory is the machine's total memory.
func machineMemory() (int64, error) {
	total, _, err := sysinfo.MachineMemory()
	if err != nil {
		return 0, err
	}
	if total > math.MaxInt64 {
		return 0, fmt.Errorf("machine memory %d is out of range", total)
	}
	return int64(total), nil
}

// hostPlan lays out the memory equation for cfg, prefill on gpu (nil: the
// CPU), and refuses a plan that does not fit.
func hostPlan(d *loader.Dir, cfg hostConfig, gpu *plan.GPUDevice) (*plan.Plan, error) {
	mc := d.Config
	w, err := plan.FromContainer(d.Container, mc, d.Summary)
	if err != nil {
		return nil, err
	}
	opts, err := cfg.Memory.options()
	if err != nil {
		return nil, err
	}
	opts.Context = cfg.Context
	if opts.Context <= 0 {
		opts.Context = plan.DefaultContext
	}
	opts.Context = min(opts.Context, mc.MaxPositionEmbeddings)
	opts.Sequences = max(cfg.MaxBatch, 1)
	opts.GPU = gpu
	if opts.PromptCache, err = cfg.PromptCache.planMemory(mc, w); err != nil {
		return nil, err
	}
	p, err := plan.New(mc, w, opts)
	if err != nil {
		return nil, err
	}
	if err := p.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(cfg.ModelDir), err)
	}
	return p, nil
}

// plannedModel is opts with the forward limits the plan sized: the rows
// and logit rows of one forward and the expert workers.
func plannedModel(p *plan.Plan, opts model.Options) model.Options {
	opts.Limits = model.Limits{Rows: p.BatchRows, LogitRows: p.LogitRows, Workers: p.Threads, Context: p.Context}
	return opts
}

// setMemoryLimit bounds the Go runtime to the plan's heap lines.
func setMemoryLimit(p *plan.Plan) {
	debug.SetMemoryLimit(p.GoMemoryLimitBytes)
}
