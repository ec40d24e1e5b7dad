package main

import (
	_ "embed"
	"fmt"
	"path/filepath"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/plan"
)

// glm52Config is the config.json of the pinned GLM-5.2 artifact (the one
// the Model page downloads; ../shared/fixtures/glm52-real/config.json).
//
//go:embed glm52/config.json
var glm52Config []byte

// Models the Fit page plans (the model query parameter of /ui/plan).
const (
	planServed = "served" // the model directory the engine serves
	planGLM52  = "glm52"  // the pinned GLM-5.2 artifact, before it is downloaded
)

// glm52PlanInput plans the pinned artifact from its config and its known
// formats (per-row int4, int8 embedding, lm_head and MTP layer, no DSA
// indexer): what a Mac needs before a byte of the 357 GiB is on disk.
func glm52PlanInput() (planInput, error) {
	cfg, err := config.Parse(glm52Config, nil)
	if err != nil {
		return planInput{}, fmt.Errorf("the built-in GLM-5.2 config: %w", err)
	}
	w, err := plan.FromConfig(cfg, plan.Artifact{})
	if err != nil {
		return planInput{}, err
	}
	w.Source = fmt.Sprintf("%s@%.12s: %s", download.DefaultRepo, download.DefaultRevision, w.Source)
	return planInput{cfg: cfg, w: w, packs: assumedPacks(w)}, nil
}

// planShape is the context, the sequence count and the KV cache type the
// engine runs with: the ones a plan for this machine must use.
func (u *uiAPI) planShape() (context, sequences int, kv string) {
	context, sequences, kv = plan.DefaultContext, appSequences, host.KVFloat32
	if u.engine == nil {
		return context, sequences, kv
	}
	cfg := u.engine.Config()
	if cfg.Context > 0 {
		context = cfg.Context
	}
	if cfg.MaxBatch > 0 {
		sequences = cfg.MaxBatch
	}
	if cfg.Memory.KVCache != "" {
		kv = cfg.Memory.KVCache
	}
	return context, sequences, kv
}

// planModel returns the plan input and the display name of model.
func (u *uiAPI) planModel(model string) (planInput, string, error) {
	switch model {
	case planGLM52:
		in, err := glm52PlanInput()
		return in, "GLM-5.2", err
	case "", planServed:
		in, err := u.planInputs(u.dir())
		return in, filepath.Base(filepath.Clean(u.dir())), err
	}
	return planInput{}, "", fmt.Errorf("unknown model %q (served or glm52)", model)
}

// planSpeed is the Fit page's speed section for plan p of in: on chip
// (an Apple chip's published figures) when one is named, else on this
// machine from the probes 'spool bench probe' cached; an unknown chip or
// missing probes say so in the section rather than failing the plan.
func (u *uiAPI) planSpeed(in planInput, p *plan.Plan, chip string) *fitSpeed {
	sp, err := predictSpeed(in.cfg, in.w, p, in.packs, chip, "", nil)
	if err != nil {
		return &fitSpeed{Unavailable: err.Error()}
	}
	return sp
}
