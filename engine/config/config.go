package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spoolhq/spool/internal/regularfile"
)

// IndexerType says whether a layer runs its own DSA indexer or reuses the
// selection of the nearest preceding full layer.
type IndexerType uint8

const (
	IndexerFull IndexerType = iota
	IndexerShared
)

func (t IndexerType) String() string {
	if t == IndexerShared {
		return "shared"
	}
	return "full"
}

// Config is the validated model configuration.
type Config struct {
	ModelType string

	VocabSize             int
	HiddenSize            int // H
	IntermediateSize      int // dense MLP width
	MoEIntermediateSize   int // per routed expert width
	NumLayers             int // decoder layers, MTP not counted
	NumHeads              int
	QLoraRank             int
	KVLoraRank            int
	QKNopeHeadDim         int
	QKRopeHeadDim         int
	VHeadDim              int
	NumRoutedExperts      int
	NumSharedExperts      int
	ExpertsPerToken       int
	NormTopKProb          bool
	RoutedScalingFactor   float64
	RMSNormEps            float64
	RopeTheta             float64
	MaxPositionEmbeddings int

	IndexTopK    int
	IndexNHeads  int
	IndexHeadDim int

	// SparseLayer[l] is true when layer l has a routed-expert MLP.
	SparseLayer []bool
	// IndexerTypes[l] is the DSA schedule of layer l.
	IndexerTypes []IndexerType

	// NumNextNPredictLayers is the MTP layer count the config declares
	// (stored as model.layers.{NumLayers}.*).
	NumNextNPredictLayers int

	// EOSTokenIDs is the union of config.json's and generation_config.json's
	// eos_token_id, in first-seen order.
	EOSTokenIDs []int
	PadTokenID  int

	Generation Generation
}

// Generation holds generation_config.json's sampling defaults.
type Generation struct {
	DoSample    bool
	Temperature float64 // 0 when unset
	TopP        float64 // 0 when unset
	TopK        int     // 0 when unset
	MinP        float64 // 0 when unset
}

// QKHeadDim is the per-head query/key width (nope + rope).
func (c *Config) QKHeadDim() int { return c.QKNopeHeadDim + c.QKRopeHeadDim }

// AttentionScale is the softmax scale (qk_head_dim^-1/2).
func (c *Config) AttentionScale() float64 { return 1 / math.Sqrt(float64(c.QKHeadDim())) }

// SparseLayers lists the indices of the layers with routed experts.
func (c *Config) SparseLayers() []int {
	var out []int
	for l, s := range c.SparseLayer {
		if s {
			out = append(out, l)
		}
	}
	return out
}

// FullIndexerLayers lists the layers that run their own DSA indexer.
func (c *Config) FullIndexerLayers() []int {
	var out []int
	for l, t := range c.IndexerTypes {
		if t == IndexerFull {
			out = append(out, l)
		}
	}
	return out
}

// maxConfigBytes bounds config.json and generation_config.json.
const maxConfigBytes = 16 << 20

// Load reads dir/config.json and, when present, dir/generation_config.json.
func Load(dir string) (*Config, error) {
	raw, err := regularfile.Read(filepath.Join(dir, "config.json"), maxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	gen, err := regularfile.Read(filepath.Join(dir, "generation_config.json"), maxConfigBytes)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(raw, gen)
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", dir, err)
	}
	return c, nil
}

// rawConfig mirrors the JSON fields Spool reads. Pointers mark optional
// fields whose absence selects a default.
type rawConfig struct {
	ModelType             string          `json:"model_type"`
	VocabSize             int             `json:"vocab_size"`
	HiddenSize            int             `json:"hidden_size"`
	IntermediateSize      int             `json:"intermediate_size"`
	MoEIntermediateSize   int             `json:"moe_intermediate_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	QLoraRank             *int            `json:"q_lora_rank"`
	KVLoraRank            int             `json:"kv_lora_rank"`
	QKNopeHeadDim         int             `json:"qk_nope_head_dim"`
	QKRopeHeadDim         int             `json:"qk_rope_head_dim"`
	VHeadDim              int             `json:"v_head_dim"`
	NRoutedExperts        int             `json:"n_routed_experts"`
	NSharedExperts        *int            `json:"n_shared_experts"`
	NumExpertsPerTok      int             `json:"num_experts_per_tok"`
	FirstKDenseReplace    *int            `json:"first_k_dense_replace"`
	MLPLayerTypes         []string        `json:"mlp_layer_types"`
	NGroup                *int            `json:"n_group"`
	TopKGroup             *int            `json:"topk_group"`
	NormTopKProb          *bool           `json:"norm_topk_prob"`
	RoutedScalingFactor   *float64        `json:"routed_scaling_factor"`
	ScoringFunc           string          `json:"scoring_func"`
	HiddenAct             string          `json:"hidden_act"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	RopeParameters        *ropeParameters `json:"rope_parameters"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
	MaxPositionEmbeddings int             `json:"max_position_embeddings"`
	AttentionBias         bool            `json:"attention_bias"`
	IndexTopK             int             `json:"index_topk"`
	IndexNHeads           int             `json:"index_n_heads"`
	IndexHeadDim          int             `json:"index_head_dim"`
	IndexerTypes          []string        `json:"indexer_types"`
	IndexTopKPattern      json.RawMessage `json:"index_topk_pattern"`
	IndexTopKFreq         *int            `json:"index_topk_freq"`
	IndexSkipTopKOffset   *int            `json:"index_skip_topk_offset"`
	NumNextNPredictLayers int             `json:"num_nextn_predict_layers"`
	TieWordEmbeddings     bool            `json:"tie_word_embeddings"`
	EOSTokenID            json.RawMessage `json:"eos_token_id"`
	PadTokenID            *int            `json:"pad_token_id"`
}

type ropeParameters struct {
	RopeTheta *float64 `json:"rope_theta"`
	RopeType  string   `json:"rope_type"`
}

type rawGeneration struct {
	EOSTokenID  json.RawMessage `json:"eos_token_id"`
	DoSample    bool            `json:"do_sample"`
	Temperature *float64        `json:"temperature"`
	TopP        *float64        `json:"top_p"`
	TopK        *int            `json:"top_k"`
	MinP        *float64        `json:"min_p"`
}

// Parse builds a Config from the bytes of config.json and (optionally, nil
// when absent) generation_config.json.
func Parse(configJSON, generationJSON []byte) (*Config, error) {
	var r rawConfig
	if err := json.Unmarshal(configJSON, &r); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	c := &Config{
		ModelType:             r.ModelType,
		VocabSize:             r.VocabSize,
		HiddenSize:            r.HiddenSize,
		IntermediateSize:      r.IntermediateSize,
		MoEIntermediateSize:   r.MoEIntermediateSize,
		NumLayers:             r.NumHiddenLayers,
		NumHeads:              r.NumAttentionHeads,
		KVLoraRank:            r.KVLoraRank,
		QKNopeHeadDim:         r.QKNopeHeadDim,
		QKRopeHeadDim:         r.QKRopeHeadDim,
		VHeadDim:              r.VHeadDim,
		NumRoutedExperts:      r.NRoutedExperts,
		NumSharedExperts:      deref(r.NSharedExperts, 1),
		ExpertsPerToken:       r.NumExpertsPerTok,
		NormTopKProb:          deref(r.NormTopKProb, true),
		RoutedScalingFactor:   deref(r.RoutedScalingFactor, 1.0),
		RMSNormEps:            deref(r.RMSNormEps, 1e-5),
		RopeTheta:             10000,
		MaxPositionEmbeddings: r.MaxPositionEmbeddings,
		IndexTopK:             r.IndexTopK,
		IndexNHeads:           r.IndexNHeads,
		IndexHeadDim:          r.IndexHeadDim,
		NumNextNPredictLayers: r.NumNextNPredictLayers,
		PadTokenID:            deref(r.PadTokenID, -1),
	}
	if r.QLoraRank == nil {
		return nil, errors.New("q_lora_rank is missing (a plain q_proj model is not GLM-5.x)")
	}
	c.QLoraRank = *r.QLoraRank
	if r.RopeParameters != nil {
		if r.RopeParameters.RopeType != "" && r.RopeParameters.RopeType != "default" {
			return nil, fmt.Errorf("rope_parameters.rope_type %q is not supported (only \"default\")", r.RopeParameters.RopeType)
		}
		if r.RopeParameters.RopeTheta != nil {
			c.RopeTheta = *r.RopeParameters.RopeTheta
		}
	}
	if len(r.RopeScaling) > 0 && string(r.RopeScaling) != "null" {
		return nil, errors.New("rope_scaling is not supported by GLM-5.x")
	}
	if err := c.checkGeometry(&r); err != nil {
		return nil, err
	}
	var err error
	if c.SparseLayer, err = mlpSchedule(&r); err != nil {
		return nil, err
	}
	if c.IndexerTypes, err = indexerSchedule(&r); err != nil {
		return nil, err
	}
	if c.EOSTokenIDs, err = appendIDs(nil, r.EOSTokenID, "config.json eos_token_id"); err != nil {
		return nil, err
	}
	if len(generationJSON) > 0 {
		var g rawGeneration
		if err := json.Unmarshal(generationJSON, &g); err != nil {
			return nil, fmt.Errorf("generation_config.json: %w", err)
		}
		if c.EOSTokenIDs, err = appendIDs(c.EOSTokenIDs, g.EOSTokenID, "generation_config.json eos_token_id"); err != nil {
			return nil, err
		}
		c.Generation = Generation{DoSample: g.DoSample, Temperature: deref(g.Temperature, 0), TopP: deref(g.TopP, 0), TopK: deref(g.TopK, 0), MinP: deref(g.MinP, 0)}
	}
	for _, id := range c.EOSTokenIDs {
		if id < 0 || id >= c.VocabSize {
			return nil, fmt.Errorf("eos_token_id %d is outside the vocabulary (%d)", id, c.VocabSize)
		}
	}
	return c, nil
}

func (c *Config) checkGeometry(r *rawConfig) error {
	if r.ModelType != "" && r.ModelType != "glm_moe_dsa" {
		return fmt.Errorf("model_type %q is not glm_moe_dsa", r.ModelType)
	}
	positive := []struct {
		name string
		v    int
		max  int
	}{
		{"vocab_size", c.VocabSize, 1 << 22},
		{"hidden_size", c.HiddenSize, 1 << 16},
		{"intermediate_size", c.IntermediateSize, 1 << 18},
		{"moe_intermediate_size", c.MoEIntermediateSize, 1 << 16},
		{"num_hidden_layers", c.NumLayers, 256},
		{"num_attention_heads", c.NumHeads, 1024},
		{"q_lora_rank", c.QLoraRank, 1 << 16},
		{"kv_lora_rank", c.KVLoraRank, 1 << 16},
		{"qk_nope_head_dim", c.QKNopeHeadDim, 4096},
		{"qk_rope_head_dim", c.QKRopeHeadDim, 4096},
		{"v_head_dim", c.VHeadDim, 4096},
		{"n_routed_experts", c.NumRoutedExperts, 4096},
		{"num_experts_per_tok", c.ExpertsPerToken, 64},
		{"max_position_embeddings", c.MaxPositionEmbeddings, 1 << 24},
	}
	for _, f := range positive {
		if f.v <= 0 || f.v > f.max {
			return fmt.Errorf("%s = %d is out of range (1..%d)", f.name, f.v, f.max)
		}
	}
	if c.QKRopeHeadDim%2 != 0 {
		return fmt.Errorf("qk_rope_head_dim = %d must be even", c.QKRopeHeadDim)
	}
	if c.NumSharedExperts < 0 || c.NumSharedExperts > 16 {
		return fmt.Errorf("n_shared_experts = %d is out of range (0..16)", c.NumSharedExperts)
	}
	if c.ExpertsPerToken > c.NumRoutedExperts {
		return fmt.Errorf("num_experts_per_tok = %d exceeds n_routed_experts = %d", c.ExpertsPerToken, c.NumRoutedExperts)
	}
	if r.NumKeyValueHeads != nil && *r.NumKeyValueHeads != c.NumHeads {
		return fmt.Errorf("num_key_value_heads = %d must equal num_attention_heads = %d (MLA)", *r.NumKeyValueHeads, c.NumHeads)
	}
	g := deref(r.NGroup, 1)
	if g != 1 {
		return fmt.Errorf("n_group = %d: group-limited routing is not supported (GLM-5.x uses 1)", g)
	}
	if tg := deref(r.TopKGroup, g); tg < 1 || tg > g {
		return fmt.Errorf("topk_group = %d is out of range (1..n_group = %d)", tg, g)
	}
	if r.ScoringFunc != "" && r.ScoringFunc != "sigmoid" {
		return fmt.Errorf("scoring_func %q is not supported (only sigmoid)", r.ScoringFunc)
	}
	if r.HiddenAct != "" && r.HiddenAct != "silu" {
		return fmt.Errorf("hidden_act %q is not supported (only silu)", r.HiddenAct)
	}
	if r.AttentionBias {
		return errors.New("attention_bias = true is not supported by GLM-5.x")
	}
	if r.TieWordEmbeddings {
		return errors.New("tie_word_embeddings = true is not supported by GLM-5.x")
	}
	if !(c.RMSNormEps > 0 && c.RMSNormEps < 1) {
		return fmt.Errorf("rms_norm_eps = %g is out of range", c.RMSNormEps)
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("rope_theta = %g is out of range", c.RopeTheta)
	}
	if c.NumNextNPredictLayers < 0 || c.NumNextNPredictLayers > 1 {
		return fmt.Errorf("num_nextn_predict_layers = %d: only 0 or 1 MTP layer is supported", c.NumNextNPredictLayers)
	}
	if c.IndexTopK < 0 || c.IndexNHeads < 0 || c.IndexHeadDim < 0 || c.IndexNHeads > 1024 || c.IndexHeadDim > 1<<16 {
		return fmt.Errorf("indexer geometry (index_topk %d, index_n_heads %d, index_head_dim %d) is out of range", c.IndexTopK, c.IndexNHeads, c.IndexHeadDim)
	}
	if c.IndexNHeads > 0 && (c.IndexTopK < 1 || c.IndexTopK > c.MaxPositionEmbeddings) {
		return fmt.Errorf("index_topk = %d is out of range (1..max_position_embeddings = %d): the sparse attention indexer must keep at least one key", c.IndexTopK, c.MaxPositionEmbeddings)
	}
	if c.IndexHeadDim > 0 && c.IndexHeadDim < c.QKRopeHeadDim {
		return fmt.Errorf("index_head_dim = %d is smaller than qk_rope_head_dim = %d", c.IndexHeadDim, c.QKRopeHeadDim)
	}
	return nil
}

func mlpSchedule(r *rawConfig) ([]bool, error) {
	n := r.NumHiddenLayers
	out := make([]bool, n)
	if r.MLPLayerTypes != nil {
		if len(r.MLPLayerTypes) != n {
			return nil, fmt.Errorf("mlp_layer_types has %d entries for %d layers", len(r.MLPLayerTypes), n)
		}
		for l, t := range r.MLPLayerTypes {
			switch t {
			case "dense":
			case "sparse":
				out[l] = true
			default:
				return nil, fmt.Errorf("mlp_layer_types[%d] = %q (want dense or sparse)", l, t)
			}
		}
		return out, nil
	}
	k := deref(r.FirstKDenseReplace, 0)
	if k < 0 || k > n {
		return nil, fmt.Errorf("first_k_dense_replace = %d is out of range (0..%d)", k, n)
	}
	for l := k; l < n; l++ {
		out[l] = true
	}
	return out, nil
}

// indexerSchedule follows HF's __post_init__: explicit indexer_types, else
// index_topk_pattern, else layer i is full iff max(i-offset+1, 0) % freq == 0.
func indexerSchedule(r *rawConfig) ([]IndexerType, error) {
	n := r.NumHiddenLayers
	out := make([]IndexerType, n)
	parse := func(names []string, field string) error {
		if len(names) != n {
			return fmt.Errorf("%s has %d entries for %d layers", field, len(names), n)
		}
		for l, t := range names {
			switch strings.ToLower(t) {
			case "full", "f":
				out[l] = IndexerFull
			case "shared", "s":
				out[l] = IndexerShared
			default:
				return fmt.Errorf("%s[%d] = %q (want full or shared)", field, l, t)
			}
		}
		return nil
	}
	switch {
	case r.IndexerTypes != nil:
		if err := parse(r.IndexerTypes, "indexer_types"); err != nil {
			return nil, err
		}
	case len(r.IndexTopKPattern) > 0 && string(r.IndexTopKPattern) != "null":
		var names []string
		var s string
		if err := json.Unmarshal(r.IndexTopKPattern, &s); err == nil {
			for _, ch := range s {
				names = append(names, string(ch))
			}
		} else if err := json.Unmarshal(r.IndexTopKPattern, &names); err != nil {
			return nil, fmt.Errorf("index_topk_pattern: %w", err)
		}
		if err := parse(names, "index_topk_pattern"); err != nil {
			return nil, err
		}
	default:
		freq := deref(r.IndexTopKFreq, 1)
		offset := deref(r.IndexSkipTopKOffset, 2)
		if freq < 1 {
			return nil, fmt.Errorf("index_topk_freq = %d must be at least 1", freq)
		}
		out = DerivedIndexerTypes(n, freq, offset)
	}
	if n > 0 && out[0] != IndexerFull {
		return nil, errors.New("layer 0 must have a full indexer (indexer_types[0] is shared)")
	}
	return out, nil
}

func appendIDs(ids []int, raw json.RawMessage, field string) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return ids, nil
	}
	var list []int
	var one int
	if err := json.Unmarshal(raw, &one); err == nil {
		list = []int{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s: want an integer or a list of integers", field)
	}
	for _, id := range list {
		dup := false
		for _, have := range ids {
			dup = dup || have == id
		}
		if !dup {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
