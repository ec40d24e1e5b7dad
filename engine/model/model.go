// Package model owns the GLM-5.2 graph (glm_moe_dsa): int8 embedding, MLA
// attention over a compressed KV cache, the DSA lightning indexer, the
// sigmoid router with shared and routed experts, the final norm and lm_head,
// and the MTP draft layer. It is pure computation: weights come from a
// Weights reader at load time, routed experts from an experts.Source at run
// time, and per-sequence state lives in a kvcache.Sequence.
//
// The math follows ../shared/docs/glm52-math.md (HF transformers 5.17).
package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/kernels"
)

// Model is a loaded GLM-5.2 model. Forward calls must not run concurrently.
type Model struct {
	cfg       *config.Config
	embed     *kernels.Matrix // [V, H]
	lmHead    *kernels.Matrix // [V, H]
	finalNorm []float32
	layers    []*layer
	mtp       *mtpHead
	hasDSA    bool
	experts   experts.Source
	rope      *rope // MLA rope (qk_rope_head_dim)
	scratch   scratch
	accel     *accelerator // the backend of large forwards (backend.go), or nil
}

// Options select optional parts of the model at load time.
type Options struct {
	// DisableDSA runs dense causal attention everywhere even when indexer
	// weights are present.
	DisableDSA bool
	// DisableMTP skips loading the MTP layer.
	DisableMTP bool
}

// Capabilities reports which optional parts a container provides.
type Capabilities struct {
	MTP bool // model.layers.{L}.* draft layer present
	DSA bool // every full indexer layer has indexer weights
}

// DetectCapabilities looks for the MTP layer and the DSA indexer weights.
func DetectCapabilities(c *config.Config, w Weights) (Capabilities, error) {
	var caps Capabilities
	full := c.FullIndexerLayers()
	have := 0
	for _, l := range full {
		if w.Has(fmt.Sprintf("model.layers.%d.self_attn.indexer.wq_b.weight", l)) {
			have++
		}
	}
	switch {
	case c.IndexTopK == 0 || c.IndexNHeads == 0 || c.IndexHeadDim == 0:
	case have == len(full) && have > 0:
		caps.DSA = true
	case have > 0:
		return caps, fmt.Errorf("model: DSA indexer weights present on %d of %d full layers", have, len(full))
	}
	if c.NumNextNPredictLayers > 0 {
		caps.MTP = w.Has(fmt.Sprintf("model.layers.%d.eh_proj.weight", c.NumLayers))
	}
	return caps, nil
}

// Load reads the resident weights. Routed experts come from src.
func Load(c *config.Config, w Weights, src experts.Source, opts Options) (*Model, error) {
	caps, err := DetectCapabilities(c, w)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: c, experts: src, hasDSA: caps.DSA && !opts.DisableDSA, rope: newRope(c.QKRopeHeadDim, c.RopeTheta)}
	ld := &loader{w: w}
	m.embed = ld.mat("model.embed_tokens.weight", c.VocabSize, c.HiddenSize)
	m.lmHead = ld.mat("lm_head.weight", c.VocabSize, c.HiddenSize)
	m.finalNorm = ld.vec("model.norm.weight", c.HiddenSize)
	for l := 0; l < c.NumLayers; l++ {
		full := c.IndexerTypes[l] == config.IndexerFull
		y := ld.layer(c, l, c.SparseLayer[l], m.hasDSA && full)
		y.fullDSA = m.hasDSA && full
		m.layers = append(m.layers, y)
	}
	if caps.MTP && !opts.DisableMTP {
		L := c.NumLayers
		p := fmt.Sprintf("model.layers.%d.", L)
		H := c.HiddenSize
		m.mtp = &mtpHead{
			enorm:    ld.vec(p+"enorm.weight", H),
			hnorm:    ld.vec(p+"hnorm.weight", H),
			headNorm: ld.vec(p+"shared_head.norm.weight", H),
			ehProj:   ld.mat(p+"eh_proj.weight", H, 2*H),
			block:    ld.layer(c, L, true, false),
		}
	}
	if ld.err != nil {
		return nil, ld.err
	}
	return m, nil
}

// Config returns the model's configuration.
func (m *Model) Config() *config.Config { return m.cfg }

// HasMTP reports whether the MTP draft layer is loaded.
func (m *Model) HasMTP() bool { return m.mtp != nil }

// HasDSA reports whether the DSA indexer runs.
func (m *Model) HasDSA() bool { return m.hasDSA }

// ExpertLayers lists the layers whose routed experts a Source must serve
// (sparse decoder layers, then the MTP layer when present).
func ExpertLayers(c *config.Config, withMTP bool) []int {
	out := c.SparseLayers()
	if withMTP {
		out = append(out, c.NumLayers)
	}
	return out
}

// CacheGeometry is what a kvcache.Sequence must store for this model.
func (m *Model) CacheGeometry() kvcache.Geometry {
	g := kvcache.Geometry{Layers: m.cfg.NumLayers, KVLora: m.cfg.KVLoraRank, Rope: m.cfg.QKRopeHeadDim, MTP: m.mtp != nil}
	if m.hasDSA {
		g.IndexDim = m.cfg.IndexHeadDim
		g.Indexer = make([]bool, m.cfg.NumLayers)
		for _, y := range m.layers {
			g.Indexer[y.index] = y.fullDSA
		}
	}
	return g
}

// NewSequence returns an empty cache for up to limit tokens.
func (m *Model) NewSequence(limit int) *kvcache.Sequence {
	if limit <= 0 || limit > m.cfg.MaxPositionEmbeddings {
		limit = m.cfg.MaxPositionEmbeddings
	}
	return kvcache.New(m.CacheGeometry(), limit)
}

// Request is one sequence's share of a forward: Tokens are appended to Seq.
type Request struct {
	Seq    *kvcache.Sequence
	Tokens []int
	// AllLogits asks for the logits of every token, not just the last.
	AllLogits bool
}

// Output is one request's result.
type Output struct {
	// Logits per returned row: every token with AllLogits, else the last.
	Logits [][]float32
	// Hidden is the final-normed hidden state of every token (the MTP input).
	Hidden [][]float32
}

// Trace, when passed to Forward, records intermediate values of every row
// (rows are numbered across requests in order).
type Trace struct {
	// Hidden[l][row]: l = 0 embedding, l = k output of decoder layer k-1.
	Hidden [][][]float32
	// Routes[layer][row]: chosen experts in selection order and their final weights.
	Routes       map[int][][]int
	RouteWeights map[int][][]float32
	// DSA[layer][row]: selected key positions ascending (nil = dense).
	DSA map[int][][]int
}

// row is one token in flight.
type row struct {
	seq   *kvcache.Sequence
	pos   int // position (RoPE angle, DSA causality)
	kv    int // index of its entry in the layer cache; it attends to entries 0..kv
	token int
}

// Forward runs the tokens of every request through the model, appending
// their state to the requests' sequences. On error the sequences are trimmed
// back to where they were.
func (m *Model) Forward(ctx context.Context, reqs []Request, tr *Trace) ([]Output, error) {
	var rows []row
	start := make([]int, len(reqs))
	for i, r := range reqs {
		if len(r.Tokens) == 0 {
			return nil, fmt.Errorf("model: request %d has no tokens", i)
		}
		for _, t := range r.Tokens {
			if t < 0 || t >= m.cfg.VocabSize {
				return nil, fmt.Errorf("model: token id %d is outside the vocabulary (%d)", t, m.cfg.VocabSize)
			}
		}
		start[i] = r.Seq.Len()
		if err := r.Seq.Reserve(r.Tokens); err != nil {
			for j := 0; j < i; j++ {
				reqs[j].Seq.Trim(start[j])
			}
			return nil, err
		}
		for j, t := range r.Tokens {
			rows = append(rows, row{seq: r.Seq, pos: start[i] + j, kv: start[i] + j, token: t})
		}
	}
	out, err := m.forwardOrFallback(func() ([]Output, error) { return m.forwardRows(ctx, reqs, rows, tr) }, reqs)
	if err != nil {
		for i, r := range reqs {
			r.Seq.Trim(start[i])
		}
		return nil, err
	}
	return out, nil
}

func (m *Model) forwardRows(ctx context.Context, reqs []Request, rows []row, tr *Trace) ([]Output, error) {
	c := m.cfg
	H := c.HiddenSize
	R := len(rows)
	h := make([]float32, R*H)
	for i, r := range rows {
		kernels.DequantRow(h[i*H:(i+1)*H], m.embed, r.token)
	}
	if tr != nil {
		tr.Hidden = [][][]float32{splitRows(slices.Clone(h), H)}
	}
	x := make([]float32, R*H)
	var sel [][]int // DSA selection per row of the most recent full layer
	for _, y := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i := 0; i < R; i++ {
			rmsNorm(x[i*H:(i+1)*H], h[i*H:(i+1)*H], y.inputNorm, c.RMSNormEps)
		}
		idx := y.index
		attn, newSel, err := m.attend(y, x, rows, func(s *kvcache.Sequence) *kvcache.Layer { return s.Layer(idx) }, sel)
		if err != nil {
			return nil, err
		}
		sel = newSel
		if tr != nil && y.fullDSA {
			if tr.DSA == nil {
				tr.DSA = map[int][][]int{}
			}
			tr.DSA[y.index] = sel
		}
		for i := range h {
			h[i] += attn[i]
		}
		m.scratch.put(attn)
		for i := 0; i < R; i++ {
			rmsNorm(x[i*H:(i+1)*H], h[i*H:(i+1)*H], y.postNorm, c.RMSNormEps)
		}
		ffn, err := m.mlpForward(ctx, y, x, R, tr)
		if err != nil {
			return nil, err
		}
		for i := range h {
			h[i] += ffn[i]
		}
		m.scratch.put(ffn)
		if tr != nil {
			tr.Hidden = append(tr.Hidden, splitRows(slices.Clone(h), H))
		}
	}
	// Final norm for every row (the MTP head consumes it), lm_head for the
	// rows asked for.
	hn := make([]float32, R*H)
	for i := 0; i < R; i++ {
		rmsNorm(hn[i*H:(i+1)*H], h[i*H:(i+1)*H], m.finalNorm, c.RMSNormEps)
	}
	outs := make([]Output, len(reqs))
	r0 := 0
	for i, req := range reqs {
		n := len(req.Tokens)
		outs[i].Hidden = splitRows(hn[r0*H:(r0+n)*H], H)
		first := r0 + n - 1
		if req.AllLogits {
			first = r0
		}
		cnt := r0 + n - first
		logits := make([]float32, cnt*c.VocabSize)
		kernels.MatMul(logits, m.lmHead, hn[first*H:(r0+n)*H], cnt)
		outs[i].Logits = splitRows(logits, c.VocabSize)
		r0 += n
	}
	return outs, nil
}

func splitRows(flat []float32, width int) [][]float32 {
	out := make([][]float32, len(flat)/width)
	for i := range out {
		out[i] = flat[i*width : (i+1)*width : (i+1)*width]
	}
	return out
}

// errNoMTP is returned by MTP calls on a model without the draft layer.
var errNoMTP = errors.New("model: the container has no MTP layer")

func nonFinite(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }
