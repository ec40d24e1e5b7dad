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

// latent computes the listed rows in the latent form.
func (a *attnCall) latent(list []int32) {
	if len(list) == 0 {
		return
	}
	if len(list) <= plan.AttentionLatentBatch {
		a.latentBatch(list)
		return
	}
	c, ws := a.m.cfg, a.ws
	work := 0
	for _, i := range list {
		work += a.keysOf(int(i)).visits() * c.NumHeads * (2*c.KVLoraRank + c.QKRopeHeadDim)
	}
	parallelFor(len(ws.workers), len(list), work, func(w, lo, hi int) {
		for _, i := range list[lo:hi] {
			a.latentRow(int(i), &ws.workers[w])
		}
	})
}

// segment is a range [lo, hi) of one row's keys (indices into its key
// set's visits).
type segment struct {
	i      int
	keys   keySet
	lo, hi int
}

// latentRow computes row i on one worker: its segments one after another,
// each merged into the running state as it completes.
func (a *attnCall) latentRow(i int, wk *attnWorker) {
	nh := a.m.cfg.NumHeads
	a.absorbQuery(i, wk.qabs, 0, nh)
	ks := a.keysOf(i)
	n, size := a.ws.segments(ks.visits())
	for s := range n {
		seg := segment{i, ks, s * size, min((s+1)*size, ks.visits())}
		if s == 0 {
			a.latentSegment(seg, wk.qabs, wk, wk.run)
			continue
		}
		a.latentSegment(seg, wk.qabs, wk, wk.seg)
		wk.run.merge(wk.seg, a.m.cfg.KVLoraRank)
	}
	a.latentOutput(i, wk.run, 0, nh)
}

// latentBatch computes up to plan.AttentionLatentBatch rows with their
// segments spread over the workers, then merges each row's segments in
// order.
func (a *attnCall) latentBatch(list []int32) {
	c, ws := a.m.cfg, a.ws
	nh, W := c.NumHeads, c.KVLoraRank+c.QKRopeHeadDim
	workers := len(ws.workers)
	nb := len(list)
	qOf := func(b int) []float32 { return ws.batchQ[b*nh*W : (b+1)*nh*W] }
	part := func(b, s int) partial { return ws.batchParts[b*ws.layout.MaxSegments+s] }
	parallelFor(workers, nb*nh, nb*nh*c.QKNopeHeadDim*c.KVLoraRank, func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			a.absorbQuery(int(list[j/nh]), qOf(j/nh), j%nh, j%nh+1)
		}
	})

	// One job per segment of every row.
	type job struct {
		b, s int
		seg  segment
	}
	var jobs [plan.AttentionLatentBatch * plan.AttentionMaxSegments]job
	nj, work := 0, 0
	for b, i := range list {
		ks := a.keysOf(int(i))
		n, size := ws.segments(ks.visits())
		for s := range n {
			jobs[nj] = job{b, s, segment{int(i), ks, s * size, min((s+1)*size, ks.visits())}}
			nj++
		}
		work += ks.visits() * nh * (2*c.KVLoraRank + c.QKRopeHeadDim)
	}
	parallelFor(workers, nj, work, func(w, lo, hi int) {
		for _, j := range jobs[lo:hi] {
			a.latentSegment(j.seg, qOf(j.b), &ws.workers[w], part(j.b, j.s))
		}
	})
	for _, j := range jobs[:nj] {
		if j.s > 0 {
			part(j.b, 0).merge(part(j.b, j.s), c.KVLoraRank)
		}
	}

	parallelFor(workers, nb*nh, nb*nh*c.VHeadDim*c.KVLoraRank, func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			a.latentOutput(int(list[j/nh]), part(j/nh, 0), j%nh, j%nh+1)
		}
	})
}

// absorbQuery writes the absorbed queries of heads [h0, h1) of row i into
// qabs ([head][latent | rope]).
func (a *attnCall) absorbQuery(i int, qabs []float32, h0, h1 int) {
	c := a.m.cfg
	dn, rkv := c.QKNopeHeadDim, c.KVLoraRank
	W, hw := rkv+c.QKRopeHeadDim, dn+c.VHeadDim
	for h := h0; h < h1; h++ {
		qh := a.query(i, h)
		kernels.VecMatThreads(qabs[h*W:h*W+rkv], a.y.kvB.RowRange(h*hw, h*hw+dn), qh[:dn], 1)
		copy(qabs[h*W+rkv:(h+1)*W], qh[dn:])
	}
}

// latentSegment runs the online softmax of every head of one row over the
// segment's keys into p, tile by tile.
func (a *attnCall) latentSegment(seg segment, qabs []float32, wk *attnWorker, p partial) {
	c := a.m.cfg
	nh, rkv, W := c.NumHeads, c.KVLoraRank, c.KVLoraRank+c.QKRopeHeadDim
	scale := float32(c.AttentionScale())
	cache, ks, tile := a.cache(seg.i), seg.keys, a.ws.layout.LatentTile
	p.reset()
	for t0 := seg.lo; t0 < seg.hi; t0 += tile {
		t1 := min(t0+tile, seg.hi)
		nt := t1 - t0
		var keys []float32
		if ks.sparse() {
			keys = wk.tile[:nt*W]
			for j, pos := range ks.list[t0:t1] {
				cache.CopyKV(keys[j*W:(j+1)*W], int(pos), int(pos)+1)
			}
		} else {
			keys = cache.KV(t0, t1, wk.tile)
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
			if alpha := onlineStep(s, &p.max[h], &p.sum[h]); alpha != 1 {
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

// latentOutput normalizes heads [h0, h1) of p, row i's state, and maps
// them through W_V into the row's outputs.
func (a *attnCall) latentOutput(i int, p partial, h0, h1 int) {
	c := a.m.cfg
	dn, rkv := c.QKNopeHeadDim, c.KVLoraRank
	hw := dn + c.VHeadDim
	for h := h0; h < h1; h++ {
		lat := p.acc[h*rkv : (h+1)*rkv]
		kernels.Scale(lat, float32(1/p.sum[h]))
		kernels.MatMulThreads(a.out(i, h), a.y.kvB.RowRange(h*hw+dn, (h+1)*hw), lat, 1, 1)
	}
}
