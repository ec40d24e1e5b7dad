package model

import (
	"math"
	"slices"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/kernels"
)

// MLA attention over the compressed cache, in two forms that compute the
// same function:
//
//   - the latent (absorbed) form maps a row's queries into the latent space
//     (W_K^T q_nope), scores each cached [latent | rope] key once for all
//     heads and weights the latents, then maps back through W_V
//     (attention_latent.go). Decode, speculative verification and DSA rows
//     use it: a row visits only the keys it attends to.
//   - the expanded form expands a tile of cached latents through kv_b to
//     per-head keys and values and scores a whole prefill chunk against it
//     with matrix products (attention_tiled.go): dense rows of long runs.
//
// Both walk the keys tile by tile with an online softmax, so no score
// matrix spans the context and nothing but the cache grows with it. Their
// buffers are the attention workspace (attention_workspace.go), sized at
// load as the memory plan lays it out.

// absorbedMaxRows is the longest run of one sequence's dense rows that the
// latent form computes. The choice depends only on the rows of that
// sequence, never on other sequences in the batch, so a sequence's rows
// give the same numbers whatever it is batched with; and speculative
// verification (two rows) computes exactly what single-token decode
// computes.
const absorbedMaxRows = 4

// attention runs MLA for every row of p (one step's rows): it appends each
// row's compressed KV (normalized latent, roped shared key) to its
// sequence's cache, then lets each row attend over its sequence's cache
// entries 0..kv, or over its DSA selection, and returns o_proj of the
// heads' outputs (a scratch buffer the caller puts back). With a backend
// in p the projections and the attention run there, the norms, RoPE, the
// cache and the indexer's scoring on the CPU in both cases.
//
// On a full DSA layer it first fills in the rows' top-k selections in
// p.sel, which the shared layers that follow reuse. p.sel is nil where no
// DSA applies (the MTP layer); p.scores, when set, receives the indexer's
// scores.
func (r *Runner) attention(y *layer, x []float32, p *pass) ([]float32, error) {
	m := r.m
	c := m.cfg
	rows, sel := p.rows, p.sel
	H, R := c.HiddenSize, len(rows)
	nh, dn, dr, dv, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	dq, W := dn+dr, rkv+dr

	// The projections of x: the compressed query and KV, and on a full DSA
	// layer the indexer's keys (and head weights when it scores).
	cq := m.scratch.get(R * c.QLoraRank)
	defer m.scratch.put(cq)
	kv := m.scratch.get(R * W)
	defer m.scratch.put(kv)
	ws, ys := []*kernels.Matrix{y.qA, y.kvA}, [][]float32{cq, kv}
	var ix indexerRows
	if y.indexer != nil {
		ix = r.indexerBuffers(y, rows, p.scores != nil)
		defer ix.put(&m.scratch)
		ws, ys = append(ws, y.indexer.wk), append(ys, ix.keys)
		if ix.w != nil {
			ws, ys = append(ws, y.indexer.weights), append(ys, ix.w)
		}
	}
	if err := p.project(x, R, ws, ys); err != nil {
		return nil, err
	}
	p.clk.lap(stepProject)
	workers := len(r.attn.workers)
	parallelFor(workers, R, R*(c.QLoraRank+W+c.IndexHeadDim)*4, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			v := cq[i*c.QLoraRank : (i+1)*c.QLoraRank]
			rmsNorm(v, v, y.qANorm, 1e-6)
			k := kv[i*W : (i+1)*W]
			rmsNorm(k[:rkv], k[:rkv], y.kvANorm, 1e-6)
			m.rope.apply(k[rkv:], rows[i].pos)
			if ix.keys != nil {
				v := ix.keys[i*c.IndexHeadDim : (i+1)*c.IndexHeadDim]
				layerNorm(v, v, y.indexer.kNormW, y.indexer.kNormB, 1e-6)
				m.rope.apply(v[:dr], rows[i].pos)
			}
		}
	})
	p.clk.lap(stepAttnHost)
	// The queries of every head (and the indexer's) from the normed cq.
	q := m.scratch.get(R * nh * dq)
	defer m.scratch.put(q)
	ws, ys = []*kernels.Matrix{y.qB}, [][]float32{q}
	if ix.q != nil {
		ws, ys = append(ws, y.indexer.wqB), append(ys, ix.q)
	}
	if err := p.project(cq, R, ws, ys); err != nil {
		return nil, err
	}
	p.clk.lap(stepProject)
	parallelFor(workers, R, R*nh*dr*8, func(_, lo, hi int) {
		cs := make([]float32, dr)
		for i := lo; i < hi; i++ {
			m.rope.angles(cs, rows[i].pos)
			for hd := 0; hd < nh; hd++ {
				off := i*nh*dq + hd*dq + dn
				rotate(q[off:off+dr], cs)
			}
		}
	})
	// Indexer keys (full DSA layers only) enter the cache with the rows;
	// then each row's selection scores the cached keys 0..pos.
	for i, r := range rows {
		var ik []float32
		if ix.keys != nil {
			ik = ix.keys[i*c.IndexHeadDim : (i+1)*c.IndexHeadDim]
		}
		y.cache(r.seq).Append(kv[i*W:(i+1)*W], ik)
	}
	p.clk.lap(stepAttnHost)
	if y.indexer != nil {
		r.indexerSelect(y, ix, rows, sel, p.scores)
		p.clk.lap(stepIndexer)
	}

	out := m.scratch.get(R * H) // the caller puts it back
	defer p.clk.lap(stepAttend)
	if p.accel != nil {
		if err := r.attendOnBackend(p.accel, y, q, rows, sel, out); err != nil {
			m.scratch.put(out)
			return nil, err
		}
		return out, nil
	}
	heads := m.scratch.get(R * nh * dv) // [row][head][v]: every value is written
	defer m.scratch.put(heads)
	a := attnCall{m: m, ws: r.attn, y: y, q: q, rows: rows, sel: sel, heads: heads}
	a.attendRows()
	kernels.MatMul(out, y.o, heads, R)
	return out, nil
}

// attnCall is one layer's attention over a forward's rows after the cache
// holds them: the layer, the rows' queries ([row][head][q_nope | q_rope])
// and DSA selection, and the heads' outputs ([row][head][v]) it writes.
type attnCall struct {
	m     *Model
	ws    *attnWorkspace // the runner's
	y     *layer
	q     []float32
	rows  []row
	sel   *selection
	heads []float32
}

// query is head h of row i's query.
func (a *attnCall) query(i, h int) []float32 {
	dq, nh := a.m.cfg.QKHeadDim(), a.m.cfg.NumHeads
	return a.q[(i*nh+h)*dq : (i*nh+h+1)*dq]
}

// out is head h of row i's output.
func (a *attnCall) out(i, h int) []float32 {
	dv, nh := a.m.cfg.VHeadDim, a.m.cfg.NumHeads
	return a.heads[(i*nh+h)*dv : (i*nh+h+1)*dv]
}

// cache is the cache layer row i attends over.
func (a *attnCall) cache(i int) *kvcache.Layer { return a.y.cache(a.rows[i].seq) }

// keySet is the keys one row attends to: its causal keys 0..n-1, or the
// listed positions (ascending). With mask the row visits every causal key
// and only the listed ones count: the all-keys-computed way of applying a
// DSA selection (Options.ComputeAllKeys).
type keySet struct {
	n    int
	list []int32
	mask bool
}

// keysOf returns the keys row i attends to.
func (a *attnCall) keysOf(i int) keySet {
	ks := keySet{n: a.rows[i].kv + 1, list: a.sel.row(i)}
	ks.mask = ks.list != nil && a.m.allKeys
	return ks
}

// visits is the number of keys the row's kernels visit.
func (k keySet) visits() int {
	if k.list != nil && !k.mask {
		return len(k.list)
	}
	return k.n
}

// sparse reports whether the row visits only its selected keys.
func (k keySet) sparse() bool { return k.list != nil && !k.mask }

// attendRows computes every head of every row into heads: the rows of each
// sequence's run (consecutive rows of one sequence, positions ascending)
// that attend densely go to the expanded form when there are more than
// absorbedMaxRows of them; every other row, DSA rows with their selected
// keys included, goes to the latent form, all of them in one batch.
func (a *attnCall) attendRows() {
	ws, rows := a.ws, a.rows
	latent := ws.latentRows[:0]
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].seq == rows[start].seq {
			end++
		}
		// Rows whose selection the latent form visits come after the dense
		// rows of their run: a row selects once it has more than
		// index_topk keys.
		dense := end
		for dense > start && a.keysOf(dense-1).sparse() {
			dense--
		}
		if dense-start > absorbedMaxRows {
			a.tiled(start, dense)
		} else {
			dense = start
		}
		for i := dense; i < end; i++ {
			latent = append(latent, int32(i))
		}
		start = end
	}
	a.latent(latent)
	ws.latentRows = latent[:0]
}

// onlineStep folds a tile's scaled scores s (-Inf for keys that do not
// count) into one softmax's running max and sum: it overwrites s with the
// weights e^(s-max') and returns e^(max-max'), the factor that rescales
// what was accumulated before. The sum adds the weights as stored, so the
// normalized result is an exact weighted mean of them.
func onlineStep(s []float32, runMax *float32, runSum *float64) float32 {
	tm := *runMax
	for _, v := range s {
		tm = max(tm, v)
	}
	if math.IsInf(float64(tm), -1) { // nothing counts yet
		clear(s)
		return 1
	}
	alpha := float32(math.Exp(float64(*runMax - tm)))
	var sum float64
	for j, v := range s {
		e := float32(math.Exp(float64(v - tm)))
		s[j] = e
		sum += float64(e)
	}
	*runSum = *runSum*float64(alpha) + sum
	*runMax = tm
	return alpha
}

// maskTile sets to -Inf the scores of the tile's keys t0, t0+1, ... that
// are not in list (ascending).
func maskTile(s []float32, list []int32, t0 int) {
	k, _ := slices.BinarySearch(list, int32(t0))
	for j := range s {
		if k < len(list) && int(list[k]) == t0+j {
			k++
			continue
		}
		s[j] = float32(math.Inf(-1))
	}
}
