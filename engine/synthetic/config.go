package synthetic

import (
	"fmt"
	"slices"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/tokenizer"
)

// glm52 returns GLM-5.2's published configuration (the values of
// ../shared/fixtures/glm52-real/config.json).
func glm52() *config.Config {
	c := &config.Config{
		ModelType:             "glm_moe_dsa",
		VocabSize:             154880,
		HiddenSize:            6144,
		IntermediateSize:      12288,
		MoEIntermediateSize:   2048,
		NumLayers:             78,
		NumHeads:              64,
		QLoraRank:             2048,
		KVLoraRank:            512,
		QKNopeHeadDim:         192,
		QKRopeHeadDim:         64,
		VHeadDim:              256,
		NumRoutedExperts:      256,
		NumSharedExperts:      1,
		ExpertsPerToken:       8,
		NormTopKProb:          true,
		RoutedScalingFactor:   2.5,
		RMSNormEps:            1e-5,
		RopeTheta:             8000000,
		MaxPositionEmbeddings: 1048576,
		IndexTopK:             2048,
		IndexNHeads:           32,
		IndexHeadDim:          128,
		NumNextNPredictLayers: 1,
		EOSTokenIDs:           []int{154820, 154827, 154829},
		PadTokenID:            154820,
	}
	setSchedules(c, 3)
	return c
}

// setSchedules makes the first dense layers dense and the rest sparse, and
// sets GLM-5.2's derived DSA schedule (index_topk_freq 4, offset 3).
func setSchedules(c *config.Config, dense int) {
	c.SparseLayer = make([]bool, c.NumLayers)
	for l := dense; l < c.NumLayers; l++ {
		c.SparseLayer[l] = true
	}
	c.IndexerTypes = config.DerivedIndexerTypes(c.NumLayers, 4, 3)
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

// modelConfig is the config of a generated model.
func modelConfig(o *Options) *config.Config {
	c := glm52()
	if o.SparseFiles {
		return c
	}
	c.VocabSize = smallVocab
	c.IntermediateSize = smallIntermediate
	c.NumLayers = o.SparseLayers + 1
	c.NumHeads = smallHeads
	c.QLoraRank = smallQLoraRank
	c.NumRoutedExperts = o.Experts
	c.NumNextNPredictLayers = 0
	if o.MTP {
		c.NumNextNPredictLayers = 1
	}
	c.EOSTokenIDs = []int{smallVocab - 3, smallVocab - 2, smallVocab - 1}
	c.PadTokenID = smallVocab - 3
	setSchedules(c, 1)
	return c
}

// expertLayers counts the layers with routed experts, the MTP layer's
// included.
func expertLayers(c *config.Config) int {
	return len(c.SparseLayers()) + c.NumNextNPredictLayers
}

// glmSpecials are the first of GLM-5.2's added tokens, in id order from
// its first added id (154,820): its three end-of-generation ids are
// <|endoftext|>, <|user|> and <|observation|>.
var glmSpecials = []string{"<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}

// endTokens are GLM-5.2's end-of-generation tokens, in id order.
var endTokens = []string{"<|endoftext|>", "<|user|>", "<|observation|>"}

// tokenizerJSON is the synthetic tokenizer of a generated model: byte
// tokens and merges, then special tokens from the first end id (the
// lowest) to the end of the vocabulary, so that the config's end ids are
// GLM-5.2's end tokens. The small models end with exactly those three;
// the skeleton has GLM-5.2's added tokens (its first ten names, then
// reserved ones).
func tokenizerJSON(c *config.Config) ([]byte, error) {
	first := slices.Min(c.EOSTokenIDs)
	names := glmSpecials
	if c.VocabSize-first == len(endTokens) {
		names = endTokens
	}
	specials := make([]string, c.VocabSize-first)
	for i := range specials {
		if i < len(names) {
			specials[i] = names[i]
		} else {
			specials[i] = fmt.Sprintf("<|reserved_%d|>", i)
		}
	}
	data, err := tokenizer.SyntheticJSON(first, specials)
	if err != nil {
		return nil, fmt.Errorf("synthetic: %w", err)
	}
	return data, nil
}
