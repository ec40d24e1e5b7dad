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
	// row in every format planned for): the rest of it is not applied.
	embedding := int64(cfg.VocabSize) * (int64(cfg.HiddenSize) + 4)
	m := Model{
		DenseBytes:         max(w.ResidentBytes-embedding, 0),
		ExpertLayers:       layers,
		ExpertsPerLayer:    cfg.NumRoutedExperts,
		ExpertsPerToken:    cfg.ExpertsPerToken,
		ExpertBytes:        w.MainExpertBytes(),
		CacheSlotsPerLayer: p.CacheSlotsPerLayer,
		PrefillSegment:     p.PrefillSegment,
		Context:            p.Context,
		// Every head scores a key (q_nope | q_rope) and weights its value.
		AttentionFlopsPerKey: 2 * float64(cfg.NumLayers) * float64(cfg.NumHeads) * float64(cfg.QKHeadDim()+cfg.VHeadDim),
	}
	if w.DSA {
		m.SelectedKeys = cfg.IndexTopK
	}
	return m
}
