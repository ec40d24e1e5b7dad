package model

import (
	"math"

	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/kernels"
)

// The latent (absorbed) form. A row's query of head h becomes
// q_abs = [W_K,h^T q_nope | q_rope], which scores a cached [latent | rope]
// key with one dot product; the softmax weights sum the latents, and W_V,h
// maps the result back to the head's output. Every head of the row scores
// a tile of keys in one kernel call, so the cache is read once for all
// heads.
//
// A row's keys are split into segments (segments, depending on their
// number only) whose partial states merge in order, so the result is the
// same whether the segments run in parallel (a small batch: decode) or
// one after another on one worker (many rows: DSA prefill).

// segments splits a row's L keys into n segments of size keys (whole
// tiles, at least MinSegment keys, at most MaxSegments segments).
func (ws *attnWorkspace) segments(L int) (n, size int) {
	l := &ws.layout
	size = max(l.MinSegment, (L+l.MaxSegments-1)/l.MaxSegments)
	size = (size + l.LatentTile - 1) / l.LatentTile * l.LatentTile
	return (L + size - 1) / size, size
}

// attendLatent computes the listed rows in the latent form.
func (m *Model) attendLatent(y *layer, q []float32, rows []row, sel *selection, list []int32, heads []float32) {
	if len(list) == 0 {
		return
	}
	c := m.cfg
	perKey := c.NumHeads * (2*c.KVLoraRank + c.QKRopeHeadDim)
	if len(list) > plan.AttentionLatentBatch {
		work := 0
		for _, i := range list {
			work += m.keysOf(rows, sel, int(i)).visits() * perKey
		}
		parallelFor(len(m.attn.workers), len(list), work, func(w, lo, hi int) {
			wk := &m.attn.workers[w]
			for _, i := range list[lo:hi] {
				m.latentRow(y, q, rows, sel, int(i), wk, heads)
			}
		})
		return
	}
	m.latentBatch(y, q, rows, sel, list, heads)
}

// latentRow computes row i on one worker: its segments one after another,
// each merged into the running state as it completes.
func (m *Model) latentRow(y *layer, q []float32, rows []row, sel *selection, i int, wk *attnWorker, heads []float32) {
	c := m.cfg
	nh, dv := c.NumHeads, c.VHeadDim
	m.absorbQuery(y, q, i, wk.qabs, 0, nh)
	ks := m.keysOf(rows, sel, i)
	n, size := m.attn.segments(ks.visits())
	for s := range n {
		p := wk.run
		if s > 0 {
			p = wk.seg
		}
		m.latentSegment(y, rows[i], ks, s*size, min((s+1)*size, ks.visits()), wk.qabs, wk, p)
		if s > 0 {
			wk.run.merge(wk.seg, c.KVLoraRank)
		}
	}
	m.latentOutput(y, wk.run, heads[i*nh*dv:(i+1)*nh*dv], 0, nh)
}

// latentBatch computes up to plan.AttentionLatentBatch rows with their
// segments spread over the workers, then merges each row's segments in
// order.
func (m *Model) latentBatch(y *layer, q []float32, rows []row, sel *selection, list []int32, heads []float32) {
	c := m.cfg
	nh, dv, W := c.NumHeads, c.VHeadDim, c.KVLoraRank+c.QKRopeHeadDim
	ws := m.attn
	workers := len(ws.workers)
	nb := len(list)
	qOf := func(b int) []float32 { return ws.batchQ[b*nh*W : (b+1)*nh*W] }
	part := func(b, s int) partial { return ws.batchParts[b*ws.layout.MaxSegments+s] }
	parallelFor(workers, nb*nh, nb*nh*c.QKNopeHeadDim*c.KVLoraRank, func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			m.absorbQuery(y, q, int(list[j/nh]), qOf(j/nh), j%nh, j%nh+1)
		}
	})

	// One job per segment of every row.
	type job struct{ b, seg, lo, hi int }
	var jobs [plan.AttentionLatentBatch * plan.AttentionMaxSegments]job
	var keys [plan.AttentionLatentBatch]keySet
	nj, work := 0, 0
	for b, i := range list {
		ks := m.keysOf(rows, sel, int(i))
		keys[b] = ks
		n, size := m.attn.segments(ks.visits())
		for s := range n {
			jobs[nj] = job{b, s, s * size, min((s+1)*size, ks.visits())}
			nj++
		}
		work += ks.visits() * nh * (2*c.KVLoraRank + c.QKRopeHeadDim)
	}
	parallelFor(workers, nj, work, func(w, lo, hi int) {
		for _, j := range jobs[lo:hi] {
			m.latentSegment(y, rows[list[j.b]], keys[j.b], j.lo, j.hi, qOf(j.b), &ws.workers[w], part(j.b, j.seg))
		}
	})
	for _, j := range jobs[:nj] {
		if j.seg > 0 {
			part(j.b, 0).merge(part(j.b, j.seg), c.KVLoraRank)
		}
	}

	parallelFor(workers, nb*nh, nb*nh*dv*c.KVLoraRank, func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			i := int(list[j/nh])
			m.latentOutput(y, part(j/nh, 0), heads[i*nh*dv:(i+1)*nh*dv], j%nh, j%nh+1)
		}
	})
}

// absorbQuery writes the absorbed queries of heads [h0, h1) of row i into
// qabs ([head][latent | rope]).
func (m *Model) absorbQuery(y *layer, q []float32, i int, qabs []float32, h0, h1 int) {
	c := m.cfg
	nh, dn, dr, dv, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	dq, W, hw := dn+dr, rkv+dr, dn+dv
	for h := h0; h < h1; h++ {
		qh := q[i*nh*dq+h*dq : i*nh*dq+(h+1)*dq]
		kernels.VecMatThreads(qabs[h*W:h*W+rkv], y.kvB.RowRange(h*hw, h*hw+dn), qh[:dn], 1)
		copy(qabs[h*W+rkv:(h+1)*W], qh[dn:])
	}
}

// latentSegment runs the online softmax of every head of row r over its
// keys [lo, hi) (indices into ks's visits) into p, tile by tile.
func (m *Model) latentSegment(y *layer, r row, ks keySet, lo, hi int, qabs []float32, wk *attnWorker, p partial) {
	c := m.cfg
	nh, rkv, W := c.NumHeads, c.KVLoraRank, c.KVLoraRank+c.QKRopeHeadDim
	scale := float32(c.AttentionScale())
	cache := m.layerCache(y, r.seq).KV
	p.reset()
	for t0 := lo; t0 < hi; t0 += m.attn.layout.LatentTile {
		t1 := min(t0+m.attn.layout.LatentTile, hi)
		nt := t1 - t0
		var keys []float32
		if ks.sparse() {
			keys = wk.tile[:nt*W]
			for j, pos := range ks.list[t0:t1] {
				copy(keys[j*W:(j+1)*W], cache[int(pos)*W:(int(pos)+1)*W])
			}
		} else {
			keys = cache[t0*W : t1*W]
		}
		scores := wk.scores[:nh*nt]
		kernels.DotRowsMultiThreads(scores, qabs, nh, keys, W, 1)
		for h := range nh {
			s := scores[h*nt : (h+1)*nt]
			for j := range s {
				s[j] *= scale
			}
			if ks.mask {
				maskTile(s, ks.list, t0)
			}
			alpha := onlineStep(s, &p.max[h], &p.sum[h])
			if alpha != 1 {
				kernels.Scale(p.acc[h*rkv:(h+1)*rkv], alpha)
			}
		}
		kernels.WeightedSumMultiThreads(wk.weighted, scores, nh, keys, W, 1)
		kernels.Add(p.acc, wk.weighted)
	}
}

// merge folds b, the state of the keys that follow a's, into a.
func (a partial) merge(b partial, latent int) {
	for h := range a.max {
		M := max(a.max[h], b.max[h])
		if math.IsInf(float64(M), -1) {
			continue
		}
		fa := float32(math.Exp(float64(a.max[h] - M)))
		fb := float32(math.Exp(float64(b.max[h] - M)))
		acc, add := a.acc[h*latent:(h+1)*latent], b.acc[h*latent:(h+1)*latent]
		for j := range acc {
			acc[j] = acc[j]*fa + add[j]*fb
		}
		a.sum[h] = a.sum[h]*float64(fa) + b.sum[h]*float64(fb)
		a.max[h] = M
	}
}

// latentOutput normalizes heads [h0, h1) of p and maps them through W_V
// into out ([head][v] of one row).
func (m *Model) latentOutput(y *layer, p partial, out []float32, h0, h1 int) {
	c := m.cfg
	dn, dv, rkv := c.QKNopeHeadDim, c.VHeadDim, c.KVLoraRank
	hw := dn + dv
	for h := h0; h < h1; h++ {
		lat := p.acc[h*rkv : (h+1)*rkv]
		kernels.Scale(lat, float32(1/p.sum[h]))
		kernels.MatMulThreads(out[h*dv:(h+1)*dv], y.kvB.RowRange(h*hw+dn, (h+1)*hw), lat, 1, 1)
	}
}
