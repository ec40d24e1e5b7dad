package config

import (
	"encoding/json"
	"errors"
	"fmt"
)

// DerivedIndexerTypes is HF's derived DSA schedule (GlmMoeDsaConfig's
// __post_init__): layer i runs its own indexer iff max(i-offset+1, 0) is a
// multiple of freq.
func DerivedIndexerTypes(layers, freq, offset int) []IndexerType {
	out := make([]IndexerType, layers)
	for i := range out {
		if max(i-offset+1, 0)%freq != 0 {
			out[i] = IndexerShared
		}
	}
	return out
}

// encodedConfig is config.json as Encode writes it: every field Parse
// reads, the fixed values of the architecture that HF expects, in the field
// order of GLM-5.2's published config.
type encodedConfig struct {
	Architectures         []string    `json:"architectures"`
	ModelType             string      `json:"model_type"`
	VocabSize             int         `json:"vocab_size"`
	HiddenSize            int         `json:"hidden_size"`
	IntermediateSize      int         `json:"intermediate_size"`
	MoEIntermediateSize   int         `json:"moe_intermediate_size"`
	NumHiddenLayers       int         `json:"num_hidden_layers"`
	NumAttentionHeads     int         `json:"num_attention_heads"`
	NumKeyValueHeads      int         `json:"num_key_value_heads"`
	QLoraRank             int         `json:"q_lora_rank"`
	KVLoraRank            int         `json:"kv_lora_rank"`
	QKNopeHeadDim         int         `json:"qk_nope_head_dim"`
	QKRopeHeadDim         int         `json:"qk_rope_head_dim"`
	QKHeadDim             int         `json:"qk_head_dim"`
	VHeadDim              int         `json:"v_head_dim"`
	NRoutedExperts        int         `json:"n_routed_experts"`
	NSharedExperts        int         `json:"n_shared_experts"`
	NumExpertsPerTok      int         `json:"num_experts_per_tok"`
	FirstKDenseReplace    *int        `json:"first_k_dense_replace,omitempty"`
	MLPLayerTypes         []string    `json:"mlp_layer_types,omitempty"`
	MoELayerFreq          int         `json:"moe_layer_freq"`
	NGroup                int         `json:"n_group"`
	TopKGroup             int         `json:"topk_group"`
	NormTopKProb          bool        `json:"norm_topk_prob"`
	RoutedScalingFactor   float64     `json:"routed_scaling_factor"`
	ScoringFunc           string      `json:"scoring_func"`
	TopKMethod            string      `json:"topk_method"`
	HiddenAct             string      `json:"hidden_act"`
	RMSNormEps            float64     `json:"rms_norm_eps"`
	RopeParameters        encodedRope `json:"rope_parameters"`
	RopeInterleave        bool        `json:"rope_interleave"`
	IndexerRopeInterleave bool        `json:"indexer_rope_interleave"`
	MaxPositionEmbeddings int         `json:"max_position_embeddings"`
	AttentionBias         bool        `json:"attention_bias"`
	AttentionDropout      float64     `json:"attention_dropout"`
	IndexTopK             int         `json:"index_topk"`
	IndexNHeads           int         `json:"index_n_heads"`
	IndexHeadDim          int         `json:"index_head_dim"`
	IndexerTypes          []string    `json:"indexer_types"`
	NumNextNPredictLayers int         `json:"num_nextn_predict_layers"`
	TieWordEmbeddings     bool        `json:"tie_word_embeddings"`
	EOSTokenID            []int       `json:"eos_token_id"`
	PadTokenID            *int        `json:"pad_token_id,omitempty"`
	TorchDType            string      `json:"torch_dtype"`
}

type encodedRope struct {
	RopeTheta float64 `json:"rope_theta"`
	RopeType  string  `json:"rope_type"`
}

// Encode writes c as a config.json that Parse reads back to c (the
// generation defaults, which live in generation_config.json, aside). The
// dense/sparse schedule is written as first_k_dense_replace when it has
// that shape, else as mlp_layer_types; the indexer schedule always as
// explicit indexer_types.
func (c *Config) Encode() ([]byte, error) {
	if c.NumLayers != len(c.SparseLayer) || c.NumLayers != len(c.IndexerTypes) {
		return nil, fmt.Errorf("config: %d layers with %d MLP and %d indexer schedule entries", c.NumLayers, len(c.SparseLayer), len(c.IndexerTypes))
	}
	if len(c.EOSTokenIDs) == 0 {
		return nil, errors.New("config: no eos_token_id")
	}
	e := encodedConfig{
		Architectures:         []string{"GlmMoeDsaForCausalLM"},
		ModelType:             "glm_moe_dsa",
		VocabSize:             c.VocabSize,
		HiddenSize:            c.HiddenSize,
		IntermediateSize:      c.IntermediateSize,
		MoEIntermediateSize:   c.MoEIntermediateSize,
		NumHiddenLayers:       c.NumLayers,
		NumAttentionHeads:     c.NumHeads,
		NumKeyValueHeads:      c.NumHeads,
		QLoraRank:             c.QLoraRank,
		KVLoraRank:            c.KVLoraRank,
		QKNopeHeadDim:         c.QKNopeHeadDim,
		QKRopeHeadDim:         c.QKRopeHeadDim,
		QKHeadDim:             c.QKHeadDim(),
		VHeadDim:              c.VHeadDim,
		NRoutedExperts:        c.NumRoutedExperts,
		NSharedExperts:        c.NumSharedExperts,
		NumExpertsPerTok:      c.ExpertsPerToken,
		MoELayerFreq:          1,
		NGroup:                1,
		TopKGroup:             1,
		NormTopKProb:          c.NormTopKProb,
		RoutedScalingFactor:   c.RoutedScalingFactor,
		ScoringFunc:           "sigmoid",
		TopKMethod:            "noaux_tc",
		HiddenAct:             "silu",
		RMSNormEps:            c.RMSNormEps,
		RopeParameters:        encodedRope{RopeTheta: c.RopeTheta, RopeType: "default"},
		RopeInterleave:        true,
		IndexerRopeInterleave: true,
		MaxPositionEmbeddings: c.MaxPositionEmbeddings,
		IndexTopK:             c.IndexTopK,
		IndexNHeads:           c.IndexNHeads,
		IndexHeadDim:          c.IndexHeadDim,
		NumNextNPredictLayers: c.NumNextNPredictLayers,
		EOSTokenID:            c.EOSTokenIDs,
		TorchDType:            "bfloat16",
	}
	if c.PadTokenID >= 0 {
		e.PadTokenID = &c.PadTokenID
	}
	if k, ok := firstKDense(c.SparseLayer); ok {
		e.FirstKDenseReplace = &k
	} else {
		for _, s := range c.SparseLayer {
			t := "dense"
			if s {
				t = "sparse"
			}
			e.MLPLayerTypes = append(e.MLPLayerTypes, t)
		}
	}
	for _, t := range c.IndexerTypes {
		e.IndexerTypes = append(e.IndexerTypes, t.String())
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("config: encoding config.json: %w", err)
	}
	return append(b, '\n'), nil
}

// firstKDense reports whether sparse is k dense layers followed by sparse
// ones only, and k.
func firstKDense(sparse []bool) (int, bool) {
	k := 0
	for k < len(sparse) && !sparse[k] {
		k++
	}
	for _, s := range sparse[k:] {
		if !s {
			return 0, false
		}
	}
	return k, true
}
