package plan

import (
	"errors"
	"fmt"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
)

// Format is the int4 flavour assumed for an artifact planned from a bare
// config.
type Format uint8

const (
	// PerRowInt4 is the pinned public artifact: int4 with one scale per
	// row for attention, dense MLPs, shared and routed experts; int8 per
	// row for the embedding, lm_head and the whole MTP layer.
	PerRowInt4 Format = iota
	// Group64Int4 is Colibri's newer converter default: as PerRowInt4 but
	// every int4 matrix carries one scale per 64 columns.
	Group64Int4
)

func (f Format) String() string {
	if f == Group64Int4 {
		return "int4-grouped/64"
	}
	return "int4-row"
}

// FormatForGroupSize maps an int4 group size to a Format: 0 is per row,
// 64 is grouped.
func FormatForGroupSize(gs int) (Format, error) {
	switch gs {
	case 0:
		return PerRowInt4, nil
	case 64:
		return Group64Int4, nil
	}
	return 0, fmt.Errorf("plan: int4 group size %d is not an assumed format (0 for per-row scales, or 64)", gs)
}

// Artifact is the storage assumed for a model planned from a bare config.
// The zero value is the pinned public artifact (per-row int4, int8
// embedding/lm_head, int8 MTP layer, no DSA indexer weights).
type Artifact struct {
	Int4 Format
	// WithIndexer adds the DSA indexer overlay (every indexer matrix int8
	// per row, norms F32) of each full indexer layer.
	WithIndexer bool
	// WithoutMTP plans without the MTP layer even when the config declares
	// one.
	WithoutMTP bool
}

// ExpertLayer is one layer that has routed experts.
type ExpertLayer struct {
	Layer   int  `json:"layer"`
	MTP     bool `json:"mtp,omitempty"`
	Experts int  `json:"experts"`
	// ExpertBytes is the on-disk size (weights plus scales) of the layer's
	// widest expert.
	ExpertBytes int64 `json:"expert_bytes"`
}

// Weights is what the plan needs to know about a model's bytes.
type Weights struct {
	// Source says where the figures come from.
	Source string `json:"source"`
	// ResidentBytes counts every tensor that stays in memory: everything
	// but the routed experts.
	ResidentBytes int64 `json:"resident_bytes"`
	// RoutedBytes counts every routed expert on disk.
	RoutedBytes int64 `json:"routed_bytes"`
	// EmbeddingBytes is the part of ResidentBytes that the embedding table
	// takes (weights and scales), which the engine reads by row on demand
	// rather than keeping (0: unknown, planned resident).
	EmbeddingBytes int64 `json:"embedding_bytes"`
	// Layers lists the expert layers: the sparse decoder layers in order,
	// then the MTP layer when it is present.
	Layers []ExpertLayer `json:"layers"`
	MTP    bool          `json:"mtp"`
	DSA    bool          `json:"dsa"`
}

// MainExpertBytes is the widest expert of the decoder layers (MTP
// excluded), 0 when there is none.
func (w *Weights) MainExpertBytes() int64 {
	var m int64
	for _, l := range w.Layers {
		if !l.MTP {
			m = max(m, l.ExpertBytes)
		}
	}
	return m
}

// MTPExpertBytes is the widest expert of the MTP layer, 0 without MTP.
func (w *Weights) MTPExpertBytes() int64 {
	var m int64
	for _, l := range w.Layers {
		if l.MTP {
			m = max(m, l.ExpertBytes)
		}
	}
	return m
}

// EmbeddingTensor names the token embedding table.
const EmbeddingTensor = "model.embed_tokens.weight"

// matrixBytes is the on-disk size of a quantized [rows, cols] matrix.
type matrixBytes func(rows, cols int) int64

func int8Row(rows, cols int) int64 { return int64(rows)*int64(cols) + 4*int64(rows) }

func int4Row(rows, cols int) int64 { return int64(rows)*int64((cols+1)/2) + 4*int64(rows) }

func int4Group(gs int) matrixBytes {
	return func(rows, cols int) int64 {
		return int64(rows)*int64((cols+1)/2) + 4*int64(rows)*int64((cols+gs-1)/gs)
	}
}

func f32(n int) int64 { return 4 * int64(n) }

// FromConfig derives the weights of the artifact a would make of cfg,
// tensor by tensor, with the tensor set container.Validate expects: the
// embedding and lm_head, the final norm, every decoder layer's attention
// and norms, dense MLPs of dense layers, routers, correction biases and
// shared experts of sparse layers, the indexer of full decoder layers (when
// a.WithIndexer; the MTP layer reuses the main model's selection and has
// none) and the MTP layer (when cfg declares one and not a.WithoutMTP).
// Vectors and routers are F32.
func FromConfig(cfg *config.Config, a Artifact) (Weights, error) {
	if cfg == nil {
		return Weights{}, errors.New("plan: no config")
	}
	var q4 matrixBytes
	switch a.Int4 {
	case PerRowInt4:
		q4 = int4Row
	case Group64Int4:
		q4 = int4Group(64)
	default:
		return Weights{}, fmt.Errorf("plan: unknown int4 format %d", a.Int4)
	}
	H, V := cfg.HiddenSize, cfg.VocabSize
	w := Weights{
		Source: fmt.Sprintf("config + assumed artifact (%s; int8 embedding, lm_head and MTP layer", a.Int4),
		MTP:    cfg.NumNextNPredictLayers > 0 && !a.WithoutMTP,
		DSA:    a.WithIndexer && cfg.IndexTopK > 0 && cfg.IndexNHeads > 0 && cfg.IndexHeadDim > 0,
	}
	if w.DSA {
		w.Source += "; int8 DSA indexer)"
	} else {
		w.Source += "; no DSA indexer)"
	}
	w.ResidentBytes = 2*int8Row(V, H) + f32(H)
	w.EmbeddingBytes = int8Row(V, H)
	for l := 0; l < cfg.NumLayers; l++ {
		w.ResidentBytes += layerBytes(cfg, cfg.SparseLayer[l], q4)
		if w.DSA && cfg.IndexerTypes[l] == config.IndexerFull {
			w.ResidentBytes += indexerBytes(cfg)
		}
	}
	expert := func(q matrixBytes) int64 {
		I := cfg.MoEIntermediateSize
		return 2*q(I, H) + q(H, I)
	}
	for _, l := range cfg.SparseLayers() {
		el := ExpertLayer{Layer: l, Experts: cfg.NumRoutedExperts, ExpertBytes: expert(q4)}
		w.Layers = append(w.Layers, el)
		w.RoutedBytes += int64(el.Experts) * el.ExpertBytes
	}
	if w.MTP {
		// eh_proj, enorm, hnorm, shared_head.norm, then a sparse decoder
		// layer, every matrix int8 per row.
		w.ResidentBytes += int8Row(H, 2*H) + 3*f32(H) + layerBytes(cfg, true, int8Row)
		el := ExpertLayer{Layer: cfg.NumLayers, MTP: true, Experts: cfg.NumRoutedExperts, ExpertBytes: expert(int8Row)}
		w.Layers = append(w.Layers, el)
		w.RoutedBytes += int64(el.Experts) * el.ExpertBytes
	}
	return w, nil
}

// layerBytes is one decoder layer without its routed experts and indexer.
func layerBytes(cfg *config.Config, sparse bool, q matrixBytes) int64 {
	H, nh := cfg.HiddenSize, cfg.NumHeads
	n := 2*f32(H) + // input and post-attention norms
		q(cfg.QLoraRank, H) + f32(cfg.QLoraRank) +
		q(nh*cfg.QKHeadDim(), cfg.QLoraRank) +
		q(cfg.KVLoraRank+cfg.QKRopeHeadDim, H) + f32(cfg.KVLoraRank) +
		q(nh*(cfg.QKNopeHeadDim+cfg.VHeadDim), cfg.KVLoraRank) +
		q(H, nh*cfg.VHeadDim)
	if !sparse {
		D := cfg.IntermediateSize
		return n + 2*q(D, H) + q(H, D)
	}
	n += f32(cfg.NumRoutedExperts*H) + f32(cfg.NumRoutedExperts) // router and correction bias
	if S := cfg.MoEIntermediateSize * cfg.NumSharedExperts; S > 0 {
		n += 2*q(S, H) + q(H, S)
	}
	return n
}

// indexerBytes is one layer's DSA indexer, int8 per row.
func indexerBytes(cfg *config.Config) int64 {
	nI, dI := cfg.IndexNHeads, cfg.IndexHeadDim
	return int8Row(nI*dI, cfg.QLoraRank) + int8Row(dI, cfg.HiddenSize) + int8Row(nI, cfg.HiddenSize) + 2*f32(dI)
}

// FromContainer takes the weights from a validated container's headers:
// the exact resident and routed bytes of sum, and per expert layer the
// widest expert found by locating every expert of the layer.
func FromContainer(c *container.Container, cfg *config.Config, sum *container.Summary) (Weights, error) {
	if c == nil || cfg == nil || sum == nil {
		return Weights{}, errors.New("plan: FromContainer needs a container, its config and its summary")
	}
	w := Weights{
		Source:        "headers of " + sum.Dir,
		ResidentBytes: sum.ResidentBytes,
		RoutedBytes:   sum.RoutedBytes,
		MTP:           sum.MTP,
		DSA:           sum.DSA,
	}
	embed, err := c.MatrixInfo(EmbeddingTensor, cfg.VocabSize, cfg.HiddenSize)
	if err != nil {
		return Weights{}, fmt.Errorf("plan: %w", err)
	}
	w.EmbeddingBytes = embed.Bytes
	layers := cfg.SparseLayers()
	if sum.MTP {
		layers = append(layers, cfg.NumLayers)
	}
	for _, l := range layers {
		el := ExpertLayer{Layer: l, MTP: l == cfg.NumLayers, Experts: cfg.NumRoutedExperts}
		for e := 0; e < cfg.NumRoutedExperts; e++ {
			loc, err := c.Expert(l, e, cfg)
			if err != nil {
				return Weights{}, fmt.Errorf("plan: %w", err)
			}
			el.ExpertBytes = max(el.ExpertBytes, loc.Bytes())
		}
		w.Layers = append(w.Layers, el)
	}
	return w, nil
}
