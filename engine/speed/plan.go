package speed

import (
	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/plan"
)

// ModelFromPlan is what a prediction needs from a model's config, its
// weights and the memory plan it runs under.
func ModelFromPlan(cfg *config.Config, w plan.Weights, p *plan.Plan) Model {
	layers := 0
	for _, l := range w.Layers {
		if !l.MTP {
			layers++
		}
	}
	// A token reads one row of the embedding table (int8 with a scale per
	// row in every format planned for): the rest of it is not applied,
	// nor is the MTP layer's dense part unless the step drafts.
	embedding := int64(cfg.VocabSize) * (int64(cfg.HiddenSize) + 4)
	mtpDense := mtpDenseBytes(cfg, w)
	m := Model{
		DenseBytes:         max(w.ResidentBytes-embedding-mtpDense, 0),
		ExpertLayers:       layers,
		ExpertsPerLayer:    cfg.NumRoutedExperts,
		ExpertsPerToken:    cfg.ExpertsPerToken,
		ExpertBytes:        w.MainExpertBytes(),
		CacheSlotsPerLayer: p.CacheSlotsPerLayer,
		PrefillSegment:     p.PrefillSegment,
		Context:            p.Context,
		MTPExpertBytes:     w.MTPExpertBytes(),
		MTPDenseBytes:      mtpDense,
		// Every head scores a key (q_nope | q_rope) and weights its value.
		AttentionFlopsPerKey: 2 * float64(cfg.NumLayers) * float64(cfg.NumHeads) * float64(cfg.QKHeadDim()+cfg.VHeadDim),
	}
	if w.DSA {
		m.SelectedKeys = cfg.IndexTopK
	}
	return m
}

// mtpDenseBytes is the resident part of w's MTP layer (0 without one):
// what the artifact's format (int8 per row, the pinned one's and the bench
// models') gives it, the difference between cfg's weights planned with
// and without it.
func mtpDenseBytes(cfg *config.Config, w plan.Weights) int64 {
	if !w.MTP {
		return 0
	}
	with, err1 := plan.FromConfig(cfg, plan.Artifact{})
	without, err2 := plan.FromConfig(cfg, plan.Artifact{WithoutMTP: true})
	if err1 != nil || err2 != nil {
		return 0
	}
	return with.ResidentBytes - without.ResidentBytes
}
