package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/kernels"
)

// Model is a loaded GLM-5.2 model: its weights, read-only after Load.
// Forwards run in a Runner's buffers; runners may forward concurrently (the
// resident and streamed expert sources both serve concurrent leases), and
// each records what its forward read (Runner.LastCost).
type Model struct {
	cfg       *config.Config
	embed     *embedding      // [V, H]
	lmHead    *kernels.Matrix // [V, H]
	finalNorm []float32
	layers    []*layer
	mtp       *mtpHead
	hasDSA    bool
	experts   experts.Source
	rope      *rope   // MLA rope (qk_rope_head_dim)
	scratch   scratch // attention's projections
	limits    Limits
	allKeys   bool // Options.ComputeAllKeys
	kvBF16    bool // Options.KVBF16
	// attnLayout is the attention workspace each runner allocates.
	attnLayout plan.AttentionLayout
	// expertRow maps a decoder layer (the MTP layer is NumLayers) to its
	// row in ExpertLayers, -1 for dense layers.
	expertRow []int

	mu  sync.Mutex // guards own: the runner of Forward and MTPForward
	own *Runner

	// accel is the backend of large forwards (backend.go), or nil.
	accel atomic.Pointer[accelerator]
	// steps, when set, accumulates the forwards' step times.
	steps atomic.Pointer[StepTimes]
}

// Options select optional parts of the model at load time.
type Options struct {
	// DisableDSA runs dense causal attention everywhere even when indexer
	// weights are present.
	DisableDSA bool
	// DisableMTP skips loading the MTP layer.
	DisableMTP bool
	// Limits bound a forward and size its buffers, attention's workspace
	// included; the memory plan sizes them. The zero value lets the
	// buffers grow as needed.
	Limits Limits
	// KVBF16 stores the KV cache in bfloat16 (kvcache.Geometry.BF16):
	// half the memory, each cached value rounded as it is stored, so the
	// output is no longer the float32 path's (its tokens usually are).
	KVBF16 bool
	// EmbeddingRows, when positive, reads the embedding table by row on
	// demand into a cache of that many rows (the plan's embedding line)
	// instead of keeping the table: Weights must then be RowWeights. 0
	// keeps the table as Weights gives it.
	EmbeddingRows int
	// ComputeAllKeys makes DSA layers score every causal key and mask the
	// unselected ones, as dense attention would, instead of computing only
	// the selected keys. The output is the same; it is the baseline that
	// spool bench prefill measures sparse attention against.
	ComputeAllKeys bool
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
	m := &Model{cfg: c, experts: src, hasDSA: caps.DSA && !opts.DisableDSA, rope: newRope(c.QKRopeHeadDim, c.RopeTheta), allKeys: opts.ComputeAllKeys}
	m.kvBF16 = opts.KVBF16
	m.attnLayout = plan.NewAttentionLayout(c, opts.Limits.attentionSizing(c, m.hasDSA, opts.KVBF16))
	ld := &loader{w: w}
	if opts.EmbeddingRows > 0 {
		rw, ok := w.(RowWeights)
		if !ok {
			return nil, fmt.Errorf("model: the weights cannot be read by row, so the embedding table cannot be read on demand")
		}
		src, err := rw.MatrixRows("model.embed_tokens.weight", c.VocabSize, c.HiddenSize)
		if err != nil {
			return nil, fmt.Errorf("model: model.embed_tokens.weight: %w", err)
		}
		m.embed = newEmbedding(src, opts.EmbeddingRows, c.VocabSize)
	} else {
		m.embed = &embedding{table: ld.mat("model.embed_tokens.weight", c.VocabSize, c.HiddenSize)}
	}
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
		m.mtp.block.mtp = true
	}
	if ld.err != nil {
		return nil, ld.err
	}
	if opts.Limits.Rows < 0 || opts.Limits.LogitRows < 0 || opts.Limits.Workers < 0 {
		return nil, fmt.Errorf("model: limits must not be negative: %+v", opts.Limits)
	}
	m.limits = opts.Limits
	m.expertRow = make([]int, c.NumLayers+1)
	for i := range m.expertRow {
		m.expertRow[i] = -1
	}
	layers := ExpertLayers(c, m.mtp != nil)
	for r, l := range layers {
		m.expertRow[l] = r
	}
	return m, nil
}

// WidestMLP is the widest intermediate size of any MLP the model applies:
// dense layers, the shared experts and the routed experts.
func WidestMLP(c *config.Config) int {
	return max(c.IntermediateSize, c.MoEIntermediateSize*max(1, c.NumSharedExperts))
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
	g := kvcache.Geometry{Layers: m.cfg.NumLayers, KVLora: m.cfg.KVLoraRank, Rope: m.cfg.QKRopeHeadDim, MTP: m.mtp != nil, BF16: m.kvBF16}
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
	// OnLayer, when set, is called after each decoder layer of the
	// forward with the layers done and the layer count (prefill progress).
	OnLayer func(done, layers int)
}

// Output is one request's result. Its slices are views of the runner's
// buffers, valid until the runner's next forward.
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
	// DSAScores[layer][row]: the indexer's raw scores of keys 0..pos of
	// every row of a full layer (rows that attend densely included).
	DSAScores map[int][][]float32
}

// row is one token in flight.
type row struct {
	seq   *kvcache.Sequence
	pos   int // position (RoPE angle, DSA causality)
	kv    int // index of its entry in the layer cache; it attends to entries 0..kv
	token int
}

// Forward is Runner.Forward with the model's own runner, for callers that
// run one forward at a time (tests, tools): its outputs are valid until the
// next Forward or MTPForward of the model. Code that forwards on several
// goroutines gives each its own Runner.
func (m *Model) Forward(ctx context.Context, reqs []Request, tr *Trace) ([]Output, error) {
	r := m.ownRunner()
	defer m.mu.Unlock()
	return r.Forward(ctx, reqs, tr)
}

// ownRunner locks the model's own runner, creating it on first use.
func (m *Model) ownRunner() *Runner {
	m.mu.Lock()
	if m.own == nil {
		m.own = m.NewRunner()
	}
	return m.own
}

// Forward runs the tokens of every request through the model, appending
// their state to the requests' sequences. On error the sequences are trimmed
// back to where they were. The outputs are views of r's buffers, valid
// until r's next forward.
func (r *Runner) Forward(ctx context.Context, reqs []Request, tr *Trace) ([]Output, error) {
	m := r.m
	total, logits := 0, 0
	for i, r := range reqs {
		if len(r.Tokens) == 0 {
			return nil, fmt.Errorf("model: request %d has no tokens", i)
		}
		for _, t := range r.Tokens {
			if t < 0 || t >= m.cfg.VocabSize {
				return nil, fmt.Errorf("model: token id %d is outside the vocabulary (%d)", t, m.cfg.VocabSize)
			}
		}
		total += len(r.Tokens)
		logits++
		if r.AllLogits {
			logits += len(r.Tokens) - 1
		}
	}
	if err := r.ws.reserve(total, logits); err != nil {
		return nil, err
	}
	rows := r.ws.rowState[:0]
	start := make([]int, len(reqs))
	for i, r := range reqs {
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
	out, err := r.forwardRows(ctx, reqs, rows, tr)
	if err != nil && m.fellBack(err) {
		// The backend failed: the forward is redone on the CPU from where
		// the sequences were.
		err = nil
		for i, req := range reqs {
			req.Seq.Trim(start[i])
			if err == nil {
				err = req.Seq.Reserve(req.Tokens)
			}
		}
		if err == nil {
			out, err = r.forwardRows(ctx, reqs, rows, tr)
		}
	}
	if err != nil {
		for i, r := range reqs {
			r.Seq.Trim(start[i])
		}
		return nil, err
	}
	return out, nil
}

func (r *Runner) forwardRows(ctx context.Context, reqs []Request, rows []row, tr *Trace) ([]Output, error) {
	m, ws := r.m, r.ws
	c := m.cfg
	H := c.HiddenSize
	R := len(rows)
	r.touched.Clear()
	r.startCost()
	clk := m.clock()
	p := pass{h: ws.h[:R*H], rows: rows, tr: tr, sel: r.dsaSelection(), accel: m.backendFor(R), clk: &clk, scratch: ws.scratch}
	for i, r := range rows {
		if err := m.embed.row(p.h[i*H:(i+1)*H], r.token); err != nil {
			return nil, err
		}
	}
	p.clk.lap(stepEmbed)
	if tr != nil {
		tr.Hidden = [][][]float32{splitRows(slices.Clone(p.h), H)}
	}
	for l, y := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := y.forward(ctx, r, &p); err != nil {
			return nil, err
		}
		if tr != nil {
			tr.Hidden = append(tr.Hidden, splitRows(slices.Clone(p.h), H))
		}
		for _, req := range reqs {
			if req.OnLayer != nil {
				req.OnLayer(l+1, len(m.layers))
			}
		}
	}
	// Final norm for every row, in place (the MTP head consumes it), and
	// lm_head for the rows asked for.
	hn := p.h
	r.normRows(hn, hn, m.finalNorm, R)
	outs := make([]Output, len(reqs))
	r0, l0 := 0, 0
	for i, req := range reqs {
		n := len(req.Tokens)
		outs[i].Hidden = split(ws.hiddenRows[r0:], hn[r0*H:(r0+n)*H], H)
		first := r0 + n - 1
		if req.AllLogits {
			first = r0
		}
		cnt := r0 + n - first
		logits := ws.logit[l0*c.VocabSize : (l0+cnt)*c.VocabSize]
		kernels.MatMul(logits, m.lmHead, hn[first*H:(r0+n)*H], cnt)
		outs[i].Logits = split(ws.logitRows[l0:], logits, c.VocabSize)
		r0 += n
		l0 += cnt
	}
	p.clk.lap(stepHead)
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
