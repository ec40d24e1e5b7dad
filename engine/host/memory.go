package host

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"runtime/debug"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/native/sysinfo"
)

// Memory planning for the engines that load a model (run, serve, app,
// the benchmarks): the plan of an opened model (with its prompt cache) for
// a configuration, and what the plan sizes at load (the forwards' limits,
// the Go memory limit).

// Memory is the memory budget, the expert cache size and the KV cache's
// type, as the --memory, --expert-cache and --kv-cache flags of fit, run
// and serve give them (plan.ParseSize sizes, KV types of ParseKVCache;
// empty: the default).
type Memory struct {
	Budget      string
	ExpertCache string
	KVCache     string
}

// KV cache types (--kv-cache).
const (
	KVFloat32  = "f32"
	KVBFloat16 = "bf16"
)

// ParseKVCache says whether a --kv-cache value asks for bfloat16: f32 (or
// float32, or empty: the default, exact) or bf16 (or bfloat16: half the
// memory).
func ParseKVCache(s string) (bf16 bool, err error) {
	switch s {
	case "", KVFloat32, "float32":
		return false, nil
	case KVBFloat16, "bfloat16":
		return true, nil
	}
	return false, fmt.Errorf("--kv-cache %q: want %s (float32, exact: the default) or %s (bfloat16, half the memory)", s, KVFloat32, KVBFloat16)
}

// Options turns the setting into plan options; an unset budget asks the
// machine.
func (m *Memory) Options() (plan.Options, error) {
	var o plan.Options
	var err error
	if m.Budget != "" {
		if o.Memory, err = plan.ParseSize(m.Budget); err != nil {
			return o, fmt.Errorf("--memory: %w", err)
		}
	}
	if m.ExpertCache != "" {
		if o.ExpertCache, err = plan.ParseSize(m.ExpertCache); err != nil {
			return o, fmt.Errorf("--expert-cache: %w", err)
		}
	}
	if o.KVBF16, err = ParseKVCache(m.KVCache); err != nil {
		return o, err
	}
	o.MachineMemory = MachineMemory
	o.Threads = runtime.GOMAXPROCS(0)
	return o, nil
}

// MachineMemory is the machine's total memory.
func MachineMemory() (int64, error) {
	total, _, err := sysinfo.MachineMemory()
	if err != nil {
		return 0, err
	}
	if total > math.MaxInt64 {
		return 0, fmt.Errorf("machine memory %d is out of range", total)
	}
	return int64(total), nil
}

// PlanFor lays out the memory equation for cfg, prefill on gpu (nil: the
// CPU), and refuses a plan that does not fit.
func PlanFor(d *loader.Dir, cfg Config, gpu *plan.GPUDevice) (*plan.Plan, error) {
	mc := d.Config
	w, err := plan.FromContainer(d.Container, mc, d.Summary)
	if err != nil {
		return nil, err
	}
	opts, err := cfg.Memory.Options()
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
	if opts.PromptCache, err = cfg.PromptCache.PlanMemory(mc, w); err != nil {
		return nil, err
	}
	if cfg.TunePlan != nil {
		if err := cfg.TunePlan(mc, w, &opts); err != nil {
			return nil, err
		}
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

// PlannedModel is opts with what the plan sized: the rows, scratch rows
// and logit rows of one forward, the expert workers, the embedding rows
// kept when the table is read on demand, and the KV cache's type.
func PlannedModel(p *plan.Plan, opts model.Options) model.Options {
	opts.Limits = model.Limits{Rows: p.BatchRows, ScratchRows: p.ScratchRows, LogitRows: p.LogitRows, Workers: p.Threads, Context: p.Context}
	opts.EmbeddingRows = p.EmbeddingRows
	opts.KVBF16 = p.KVBF16()
	return opts
}

// SetMemoryLimit bounds the Go runtime to the plan's heap lines.
func SetMemoryLimit(p *plan.Plan) {
	debug.SetMemoryLimit(p.GoMemoryLimitBytes)
}

// WeightsOf validates the container of dir and takes the weights
// from its headers.
func WeightsOf(dir string) (*config.Config, plan.Weights, error) {
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, plan.Weights{}, err
	}
	c, err := container.Open(dir)
	if err != nil {
		return nil, plan.Weights{}, err
	}
	defer c.Close()
	sum, err := container.Validate(c, cfg)
	if err != nil {
		return nil, plan.Weights{}, err
	}
	w, err := plan.FromContainer(c, cfg, sum)
	return cfg, w, err
}
