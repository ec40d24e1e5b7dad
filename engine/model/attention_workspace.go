package model

import (
	"math"
	"runtime"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/plan"
)

// attnWorkspace is attention's memory, allocated once at load as the
// memory plan lays it out (plan.NewAttentionLayout; the plan line is
// plan.AttentionWorkspace): per worker the kernels' tiles, partial sums
// and top-k heap, and shared the decode batch and the latent row list of
// the rows a step attends for (a scratch's worth; the DSA selection of a
// forward's rows is per-row state of the runner's workspace).
type attnWorkspace struct {
	layout  plan.AttentionLayout
	workers []attnWorker

	// The latent batch: absorbed queries of up to plan.AttentionLatentBatch
	// rows, and the partial state of each of their segments
	// ([row*MaxSegments+segment]).
	batchQ     []float32
	batchParts []partial

	latentRows []int32 // the rows a step computes in the latent form
}

// attnWorker is one worker's buffers.
type attnWorker struct {
	// latent form
	qabs     []float32 // [head][latent | rope]: absorbed query of one row
	tile     []float32 // [key][latent | rope]: gathered selected keys
	scores   []float32 // [head][key]: scores, then weights, of a tile
	weighted []float32 // [head][latent]: a tile's weighted latents
	seg, run partial   // a segment's state and the running merge

	// expanded form
	kvTile  []float32 // [key][latent | rope]: a tile's cached rows from a bfloat16 cache
	latent  []float32 // [key][latent]: a tile's cached latents
	expand  []float32 // [key][k_nope | v]: their expansion for one head
	keys    []float32 // [key][k_nope | k_rope]
	valsT   []float32 // [v][key]
	queries []float32 // [row][q_nope | q_rope] of one head
	probs   []float32 // [row][key]
	out     []float32 // [row][v]
	rowMax  []float32
	rowSum  []float64

	// indexer
	idxTile  []float32 // [key][index dim]: a tile's indexer keys from a bfloat16 cache
	dots     []float32 // [index head][key]
	idxScore []float32 // [key]
	top      topK
}

// partial is the online-softmax state of every head of one row over some
// of its keys: sum[h] = Σ e^(s-max[h]), acc[h] = Σ e^(s-max[h]) latent.
type partial struct {
	acc []float32 // [head][latent]
	max []float32
	sum []float64
}

func newPartial(heads, latent int) partial {
	return partial{acc: make([]float32, heads*latent), max: make([]float32, heads), sum: make([]float64, heads)}
}

// reset empties the state: no keys seen.
func (p partial) reset() {
	clear(p.acc)
	clear(p.sum)
	for h := range p.max {
		p.max[h] = float32(math.Inf(-1))
	}
}

func (p partial) bytes() int64 {
	return int64(len(p.acc))*4 + int64(len(p.max))*4 + int64(len(p.sum))*8
}

func newAttnWorkspace(l plan.AttentionLayout) *attnWorkspace {
	if l.MaxSegments > plan.AttentionMaxSegments {
		panic("model: attention layout splits a row into more segments than plan.AttentionMaxSegments")
	}
	nh, W, rkv := l.Heads, l.Latent+l.Rope, l.Latent
	dq, hw, dv := l.Nope+l.Rope, l.Nope+l.V, l.V
	tl, te, ti, S := l.LatentTile, l.ExpandedTile, l.IndexerTile, l.BlockRows
	ws := &attnWorkspace{
		layout:     l,
		workers:    make([]attnWorker, l.Threads),
		batchQ:     make([]float32, plan.AttentionLatentBatch*nh*W),
		batchParts: make([]partial, plan.AttentionLatentBatch*l.MaxSegments),
		latentRows: make([]int32, 0, l.Rows),
	}
	for i := range ws.batchParts {
		ws.batchParts[i] = newPartial(nh, rkv)
	}
	for i := range ws.workers {
		w := &ws.workers[i]
		w.qabs = make([]float32, nh*W)
		w.tile = make([]float32, tl*W)
		w.scores = make([]float32, nh*tl)
		w.weighted = make([]float32, nh*rkv)
		w.seg, w.run = newPartial(nh, rkv), newPartial(nh, rkv)
		if l.BF16 {
			w.kvTile = make([]float32, te*W)
		}
		w.latent = make([]float32, te*rkv)
		w.expand = make([]float32, te*hw)
		w.keys = make([]float32, te*dq)
		w.valsT = make([]float32, dv*te)
		w.queries = make([]float32, S*dq)
		w.probs = make([]float32, S*te)
		w.out = make([]float32, S*dv)
		w.rowMax = make([]float32, S)
		w.rowSum = make([]float64, S)
		if l.Indexer {
			w.dots = make([]float32, l.IndexHeads*ti)
			w.idxScore = make([]float32, ti)
			if l.BF16 {
				w.idxTile = make([]float32, ti*l.IndexDim)
			}
		}
		if l.Selects {
			w.top = newTopK(l.TopK)
		}
	}
	return ws
}

// bytes is the memory the workspace holds, counted from its buffers.
func (ws *attnWorkspace) bytes() int64 {
	f := func(s []float32) int64 { return int64(cap(s)) * 4 }
	n := f(ws.batchQ) + int64(cap(ws.latentRows))*4
	for _, p := range ws.batchParts {
		n += p.bytes()
	}
	for i := range ws.workers {
		w := &ws.workers[i]
		for _, b := range [][]float32{w.qabs, w.tile, w.scores, w.weighted, w.kvTile, w.latent, w.expand, w.keys, w.valsT,
			w.queries, w.probs, w.out, w.rowMax, w.idxTile, w.dots, w.idxScore, w.top.score} {
			n += f(b)
		}
		n += w.seg.bytes() + w.run.bytes() + int64(cap(w.rowSum))*8 + int64(cap(w.top.pos))*4
	}
	return n
}

// AttentionWorkspaceBytes is the memory of the attention workspace each
// runner allocates (the plan's plan.ItemAttention line).
func (m *Model) AttentionWorkspaceBytes() int64 { return m.attnLayout.Bytes() }

// AttentionWorkspaceBytes is the memory r's attention workspace holds.
func (r *Runner) AttentionWorkspaceBytes() int64 { return r.attn.bytes() }

// selection is the DSA choice of the most recent full layer for every row
// of a forward: rows[i] lists the selected key positions ascending, or is
// nil where the row attends densely (it has at most index_topk causal
// keys). Shared layers reuse it; the next full layer overwrites it. It is
// per-row state of the workspace (the rows of a forward go through a layer
// a scratch's worth at a time, and a shared layer reuses the selection of
// every row).
type selection struct {
	k     int
	rows  [][]int32
	store []int32 // k positions per row
}

// reset empties the selection for a forward of n rows: every row dense. A
// forward of more rows, or longer sequences, than the plan's grows the
// store (the plan bounds both).
func (s *selection) reset(n int) {
	if n > cap(s.rows) || n*s.k > len(s.store) {
		s.rows = make([][]int32, 0, n)
		s.store = make([]int32, n*s.k)
	}
	s.rows = s.rows[:n]
	clear(s.rows)
}

// view is the selection of rows [lo, hi): row i of the view is row lo+i.
// Rows past the selection's (before a full layer has run) are dense.
func (s *selection) view(lo, hi int) *selection {
	if s == nil {
		return nil
	}
	v := &selection{k: s.k}
	if hi <= len(s.rows) {
		v.rows = s.rows[lo:hi:hi]
		v.store = s.store[lo*s.k : hi*s.k : hi*s.k]
	}
	return v
}

// slot is row i's storage.
func (s *selection) slot(i int) []int32 { return s.store[i*s.k : (i+1)*s.k : (i+1)*s.k] }

// row returns row i's selected keys, or nil for dense attention.
func (s *selection) row(i int) []int32 {
	if s == nil || i >= len(s.rows) {
		return nil
	}
	return s.rows[i]
}

// dsaSelection returns the runner's selection store, emptied for a new
// forward: until a full DSA layer runs, every row attends densely.
func (r *Runner) dsaSelection() *selection {
	r.ws.sel.rows = r.ws.sel.rows[:0]
	return &r.ws.sel
}

// attentionSizing is what sizes a runner's attention workspace.
func (o Limits) attentionSizing(c *config.Config, dsa, bf16 bool) plan.AttentionSizing {
	s := plan.AttentionSizing{Rows: o.scratchRows(), Context: o.Context, Threads: o.Workers, DSA: dsa, BF16: bf16}
	if s.Context <= 0 {
		s.Context = c.MaxPositionEmbeddings
	}
	if s.Threads <= 0 {
		s.Threads = runtime.GOMAXPROCS(0)
	}
	return s
}
