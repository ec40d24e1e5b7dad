package benchmodel

import (
	"encoding/json"
	"fmt"
)

// configJSON is the config.json a generated model carries, with the field
// order of GLM-5.2's published config.
type configJSON struct {
	Architectures         []string       `json:"architectures"`
	ModelType             string         `json:"model_type"`
	VocabSize             int            `json:"vocab_size"`
	HiddenSize            int            `json:"hidden_size"`
	IntermediateSize      int            `json:"intermediate_size"`
	MoEIntermediateSize   int            `json:"moe_intermediate_size"`
	NumHiddenLayers       int            `json:"num_hidden_layers"`
	NumAttentionHeads     int            `json:"num_attention_heads"`
	NumKeyValueHeads      int            `json:"num_key_value_heads"`
	QLoraRank             int            `json:"q_lora_rank"`
	KVLoraRank            int            `json:"kv_lora_rank"`
	QKNopeHeadDim         int            `json:"qk_nope_head_dim"`
	QKRopeHeadDim         int            `json:"qk_rope_head_dim"`
	QKHeadDim             int            `json:"qk_head_dim"`
	VHeadDim              int            `json:"v_head_dim"`
	HeadDim               int            `json:"head_dim"`
	NRoutedExperts        int            `json:"n_routed_experts"`
	NSharedExperts        int            `json:"n_shared_experts"`
	NumExpertsPerTok      int            `json:"num_experts_per_tok"`
	FirstKDenseReplace    int            `json:"first_k_dense_replace"`
	MoELayerFreq          int            `json:"moe_layer_freq"`
	NGroup                int            `json:"n_group"`
	TopKGroup             int            `json:"topk_group"`
	NormTopKProb          bool           `json:"norm_topk_prob"`
	RoutedScalingFactor   float64        `json:"routed_scaling_factor"`
	ScoringFunc           string         `json:"scoring_func"`
	TopKMethod            string         `json:"topk_method"`
	HiddenAct             string         `json:"hidden_act"`
	RMSNormEps            float64        `json:"rms_norm_eps"`
	RopeParameters        ropeParameters `json:"rope_parameters"`
	RopeInterleave        bool           `json:"rope_interleave"`
	IndexerRopeInterleave bool           `json:"indexer_rope_interleave"`
	MaxPositionEmbeddings int            `json:"max_position_embeddings"`
	AttentionBias         bool           `json:"attention_bias"`
	AttentionDropout      float64        `json:"attention_dropout"`
	IndexTopK             int            `json:"index_topk"`
	IndexNHeads           int            `json:"index_n_heads"`
	IndexHeadDim          int            `json:"index_head_dim"`
	IndexTopKFreq         int            `json:"index_topk_freq"`
	IndexSkipTopKOffset   int            `json:"index_skip_topk_offset"`
	IndexerTypes          []string       `json:"indexer_types"`
	IndexShareForMTP      bool           `json:"index_share_for_mtp_iteration"`
	NumNextNPredictLayers int            `json:"num_nextn_predict_layers"`
	TieWordEmbeddings     bool           `json:"tie_word_embeddings"`
	EOSTokenID            []int          `json:"eos_token_id"`
	PadTokenID            int            `json:"pad_token_id"`
	TorchDType            string         `json:"torch_dtype"`
}

type ropeParameters struct {
	RopeTheta float64 `json:"rope_theta"`
	RopeType  string  `json:"rope_type"`
}

// glm52 returns GLM-5.2's published configuration (the values of
// ../shared/fixtures/glm52-real/config.json).
func glm52() configJSON {
	c := configJSON{
		Architectures:         []string{"GlmMoeDsaForCausalLM"},
		ModelType:             "glm_moe_dsa",
		VocabSize:             154880,
		HiddenSize:            6144,
		IntermediateSize:      12288,
		MoEIntermediateSize:   2048,
		NumHiddenLayers:       78,
		NumAttentionHeads:     64,
		NumKeyValueHeads:      64,
		QLoraRank:             2048,
		KVLoraRank:            512,
		QKNopeHeadDim:         192,
		QKRopeHeadDim:         64,
		QKHeadDim:             256,
		VHeadDim:              256,
		HeadDim:               192,
		NRoutedExperts:        256,
		NSharedExperts:        1,
		NumExpertsPerTok:      8,
		FirstKDenseReplace:    3,
		MoELayerFreq:          1,
		NGroup:                1,
		TopKGroup:             1,
		NormTopKProb:          true,
		RoutedScalingFactor:   2.5,
		ScoringFunc:           "sigmoid",
		TopKMethod:            "noaux_tc",
		HiddenAct:             "silu",
		RMSNormEps:            1e-5,
		RopeParameters:        ropeParameters{RopeTheta: 8000000, RopeType: "default"},
		RopeInterleave:        true,
		IndexerRopeInterleave: true,
		MaxPositionEmbeddings: 1048576,
		IndexTopK:             2048,
		IndexNHeads:           32,
		IndexHeadDim:          128,
		IndexTopKFreq:         4,
		IndexSkipTopKOffset:   3,
		IndexShareForMTP:      true,
		NumNextNPredictLayers: 1,
		EOSTokenID:            []int{154820, 154827, 154829},
		PadTokenID:            154820,
		TorchDType:            "bfloat16",
	}
	c.IndexerTypes = indexerTypes(c.NumHiddenLayers, c.IndexTopKFreq, c.IndexSkipTopKOffset)
	return c
}

// indexerTypes is HF's derived DSA schedule: layer i runs its own indexer
// ("full") iff max(i-offset+1, 0) is a multiple of freq.
func indexerTypes(layers, freq, offset int) []string {
	out := make([]string, layers)
	for i := range out {
		out[i] = "shared"
		if max(i-offset+1, 0)%freq == 0 {
			out[i] = "full"
		}
	}
	return out
}

// Small-model geometry: everything but the routed experts' shape is
// shrunk where the config allows. hidden_size and moe_intermediate_size
// stay GLM-5.2's so every routed expert has the real size; the MLA latent
// widths (kv_lora_rank, qk_rope_head_dim) stay real so the KV cache per
// token and layer is the real one.
const (
	smallVocab        = 2048
	smallHeads        = 4
	smallQLoraRank    = 256
	smallIntermediate = 1024
)

// benchConfig is the config of a generated model.
func benchConfig(o *Options) configJSON {
	c := glm52()
	if o.SparseFiles {
		return c
	}
	c.VocabSize = smallVocab
	c.IntermediateSize = smallIntermediate
	c.NumHiddenLayers = o.SparseLayers + 1
	c.FirstKDenseReplace = 1
	c.NumAttentionHeads = smallHeads
	c.NumKeyValueHeads = smallHeads
	c.QLoraRank = smallQLoraRank
	c.NRoutedExperts = o.Experts
	c.NumNextNPredictLayers = 0
	c.IndexerTypes = indexerTypes(c.NumHiddenLayers, c.IndexTopKFreq, c.IndexSkipTopKOffset)
	c.EOSTokenID = []int{smallVocab - 3, smallVocab - 2, smallVocab - 1}
	c.PadTokenID = smallVocab - 3
	return c
}

func (c configJSON) encode() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("benchmodel: encoding config.json: %w", err)
	}
	return append(b, '\n'), nil
}
