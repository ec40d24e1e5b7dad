package host

import (
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/server"
)

// Serving is what engine/server serves of e: its scheduler, tokenizer and
// template, the constraints that enforce response formats, the expert
// tier's telemetry (the heat map), the sections /stats adds (the plan,
// the tiers, the GPU, memory pressure, the prompt cache) and the model's
// footprint for Ollama's listings. e needs its scheduler.
func (e *Engine) Serving() (server.Engine, error) {
	lm, p := e.Model, e.Plan
	eng := server.Engine{
		Scheduler: e.Scheduler, Tokenizer: lm.Tokenizer, Template: lm.Template,
		Extra:     e.stats,
		Footprint: footprintOf(lm.Dir.Container, p),
	}
	if e.Experts != nil {
		eng.Experts = e.Experts
	}
	var err error
	if eng.Constraints, err = server.GrammarConstraints(lm.Tokenizer, lm.Dir.Config.EOSTokenIDs); err != nil {
		return server.Engine{}, err
	}
	return eng, nil
}

// stats are the sections of /stats that describe e.
func (e *Engine) stats() map[string]any {
	out := map[string]any{"plan": e.Plan, "gpu": e.GPU.Status()}
	if e.Experts != nil {
		out["tiers"] = e.Experts.Stats()
	}
	if e.Pressure != nil {
		out["memory_pressure"] = e.Pressure.Stats()
	}
	if e.PromptCache != nil {
		out["prompt_cache"] = e.PromptCache.Stats()
	}
	return out
}

// footprintOf is what the model in c takes, as Ollama's listings report
// it: its weight files on disk, the memory plan p's process footprint, and
// what of it lives on a GPU (a discrete device's lines add to the
// process's; on unified memory they are lines of it already).
func footprintOf(c *container.Container, p *plan.Plan) server.ModelFootprint {
	var f server.ModelFootprint
	for _, sh := range c.Shards() {
		f.DiskBytes += sh.Size
	}
	f.MemoryBytes = p.PlannedProcessBytes
	if g := p.GPU; g != nil {
		f.GPUBytes = g.DeviceBytes
		if !g.Unified {
			f.MemoryBytes += g.DeviceBytes
		}
	}
	return f
}
