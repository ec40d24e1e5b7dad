package host

import (
	"fmt"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/plan"
)

// Preview is what Open would build for a configuration, found without
// reading a weight.
type Preview struct {
	// Model is the model's configuration.
	Model *config.Config
	// Plan is the memory plan Open would load with: with the GPU's lines
	// when the GPU fits it, else the CPU's.
	Plan *plan.Plan
	// GPU is the status the GPU would have: Active when prefill would run
	// on it, else why not.
	GPU GPUStatus
}

// PreviewOpen checks every file of cfg's model and plans its memory as
// Open does (the GPU's lines, TunePlan), and closes them again: what a
// benchmark needs to decide its legs, and the app to check a model
// before it stops the one it serves.
func PreviewOpen(cfg Config) (*Preview, error) {
	mode, err := CheckGPUMode(cfg.GPU)
	if err != nil {
		return nil, err
	}
	lm, err := OpenModel(cfg.ModelDir)
	if err != nil {
		return nil, err
	}
	defer lm.Close()
	g := OpenGPU(mode, nil, gpuOptions(cfg))
	defer g.Close()
	p, err := g.Plan(func(dev *plan.GPUDevice) (*plan.Plan, error) { return PlanFor(lm.Dir, cfg, dev) })
	if err != nil {
		return nil, err
	}
	return &Preview{Model: lm.Dir.Config, Plan: p, GPU: g.preview(p)}, nil
}

// FitContext is the context a serving engine of cfg plans: cfg.Context,
// checked against the model's positions and the memory plan, or when it is
// 0 the largest multiple of 1024 up to most that the plan fits on the CPU
// (a start falls back to the CPU's plan when the GPU's lines do not fit).
func FitContext(cfg Config, most int) (int, error) {
	lm, err := OpenModel(cfg.ModelDir)
	if err != nil {
		return 0, err
	}
	defer lm.Close()
	limit := lm.Dir.Config.MaxPositionEmbeddings
	fits := func(n int) error {
		c := cfg
		c.Context = n
		_, err := PlanFor(lm.Dir, c, nil)
		return err
	}
	if cfg.Context > 0 {
		if cfg.Context > limit {
			return 0, fmt.Errorf("--context %d is more than the model's %d positions", cfg.Context, limit)
		}
		if err := fits(cfg.Context); err != nil {
			return 0, fmt.Errorf("--context %d: %w", cfg.Context, err)
		}
		return cfg.Context, nil
	}
	hi := min(limit, most)
	if fits(hi) == nil {
		return hi, nil
	}
	// Memory grows with context: bisect on multiples of 1024.
	lo := 0
	for step := hi / 1024; lo+1 < step; {
		mid := (lo + step) / 2
		if fits(mid*1024) == nil {
			lo = mid
		} else {
			step = mid
		}
	}
	if lo == 0 {
		err := fits(min(hi, 1024))
		if err == nil {
			return min(hi, 1024), nil
		}
		return 0, err
	}
	return lo * 1024, nil
}
