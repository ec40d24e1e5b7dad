package model

import (
	"math"
	"slices"
	"runtime"
	"sync"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/kernels"
)

// attention runs MLA for every row: it appends each row's compressed KV
// (normalized latent, roped shared key) to its sequence's cache, then lets
// each row attend over its sequence's keys 0..pos (or its DSA selection)
// with the absorbed formulation, and returns o_proj of the heads' outputs.
//
// On a full DSA layer it first computes the rows' top-k selection, which it
// returns for the shared layers that follow; otherwise it returns sel.
func (m *Model) attention(y *layer, x []float32, rows []row, cacheOf func(*kvcache.Sequence) *kvcache.Layer, sel [][]int) ([]float32, [][]int) {
	c := m.cfg
	H, R := c.HiddenSize, len(rows)
	nh, dn, dr, dv, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	dq := dn + dr

	cq := make([]float32, R*c.QLoraRank)
	kernels.MatMul(cq, y.qA, x, R)
	for i := 0; i < R; i++ {
		v := cq[i*c.QLoraRank : (i+1)*c.QLoraRank]
		rmsNorm(v, v, y.qANorm, 1e-6)
	}
	q := make([]float32, R*nh*dq)
	kernels.MatMul(q, y.qB, cq, R)
	kv := make([]float32, R*(rkv+dr))
	kernels.MatMul(kv, y.kvA, x, R)
	for i, r := range rows {
		for hd := 0; hd < nh; hd++ {
			off := i*nh*dq + hd*dq + dn
			m.rope.apply(q[off:off+dr], r.pos)
		}
		k := kv[i*(rkv+dr) : (i+1)*(rkv+dr)]
		rmsNorm(k[:rkv], k[:rkv], y.kvANorm, 1e-6)
		m.rope.apply(k[rkv:], r.pos)
	}
	// Indexer keys of this layer (full DSA layers only).
	var idxKeys []float32
	if y.indexer != nil {
		idxKeys = m.indexerKeys(y, x, rows)
		sel = m.indexerSelect(y, x, cq, idxKeys, rows)
	}
	for i, r := range rows {
		var ik []float32
		if idxKeys != nil {
			ik = idxKeys[i*c.IndexHeadDim : (i+1)*c.IndexHeadDim]
		}
		cacheOf(r.seq).Append(kv[i*(rkv+dr):i*(rkv+dr)+rkv], kv[i*(rkv+dr)+rkv:(i+1)*(rkv+dr)], ik)
	}

	ctx := make([]float32, R*nh*dv)
	scale := float32(c.AttentionScale())
	parallelFor(R*nh, func(lo, hi int) {
		qabs := make([]float32, rkv)
		clat := make([]float32, rkv)
		var scores []float32
		for job := lo; job < hi; job++ {
			i, hd := job/nh, job%nh
			r := rows[i]
			cache := cacheOf(r.seq)
			qh := q[i*nh*dq+hd*dq : i*nh*dq+(hd+1)*dq]
			wk := y.kvB.RowRange(hd*(dn+dv), hd*(dn+dv)+dn)
			kernels.VecMat(qabs, wk, qh[:dn])
			keys := keysOf(sel, i, r.pos)
			n := r.kv + 1
			if keys != nil {
				n = len(keys)
			}
			scores = scores[:0]
			for j := 0; j < n; j++ {
				s := j
				if keys != nil {
					s = keys[j]
				}
				z := kernels.Dot(qabs, cache.Latent[s*rkv:(s+1)*rkv]) + kernels.Dot(qh[dn:], cache.Rope[s*dr:(s+1)*dr])
				scores = append(scores, z*scale)
			}
			softmaxInPlace(scores)
			clear(clat)
			for j, p := range scores {
				s := j
				if keys != nil {
					s = keys[j]
				}
				kernels.Axpy(clat, p, cache.Latent[s*rkv:(s+1)*rkv])
			}
			wv := y.kvB.RowRange(hd*(dn+dv)+dn, (hd+1)*(dn+dv))
			kernels.MatVec(ctx[(i*nh+hd)*dv:(i*nh+hd+1)*dv], wv, clat)
		}
	})
	out := make([]float32, R*H)
	kernels.MatMul(out, y.o, ctx, R)
	return out, sel
}

// keysOf returns the key positions row i attends to, or nil for dense
// causal attention over 0..pos.
func keysOf(sel [][]int, i, pos int) []int {
	if sel == nil || sel[i] == nil {
		return nil
	}
	return sel[i]
}

// parallelFor splits [0, n) into contiguous chunks run on up to GOMAXPROCS
// goroutines and waits for them. Results must not depend on the split.
func parallelFor(n int, body func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		body(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			body(lo, hi)
		}()
	}
	wg.Wait()
}

// indexerKeys computes kI = RoPE(LayerNorm(wk x)) for every row.
func (m *Model) indexerKeys(y *layer, x []float32, rows []row) []float32 {
	c := m.cfg
	dI := c.IndexHeadDim
	k := make([]float32, len(rows)*dI)
	kernels.MatMul(k, y.indexer.wk, x, len(rows))
	for i, r := range rows {
		v := k[i*dI : (i+1)*dI]
		layerNorm(v, v, y.indexer.kNormW, y.indexer.kNormB, 1e-6)
		m.rope.apply(v[:c.QKRopeHeadDim], r.pos)
	}
	return k
}

// indexerSelect runs the lightning indexer of a full layer and returns, per
// row, the selected key positions (ascending), or nil where the row has at
// most index_topk causal keys and attends densely. It needs the rows' q
// latent cq and the rows' own keys; earlier keys come from the cache, which
// must not yet hold this forward's rows.
func (m *Model) indexerSelect(y *layer, x, cq, newKeys []float32, rows []row) [][]int {
	c := m.cfg
	R := len(rows)
	K := c.IndexTopK
	need := false
	for _, r := range rows {
		need = need || r.pos+1 > K
	}
	if !need {
		return nil
	}
	nI, dI, dr := c.IndexNHeads, c.IndexHeadDim, c.QKRopeHeadDim
	qI := make([]float32, R*nI*dI)
	kernels.MatMul(qI, y.indexer.wqB, cq, R)
	w := make([]float32, R*nI)
	kernels.MatMul(w, y.indexer.weights, x, R)
	wScale := float32(1 / math.Sqrt(float64(nI)))
	for i := range w {
		w[i] *= wScale
	}
	kScale := float32(1 / math.Sqrt(float64(dI)))

	sel := make([][]int, R)
	// Rows of one sequence are consecutive; the keys of row i are the cached
	// keys (before this forward) followed by this forward's rows of the
	// same sequence up to i.
	parallelFor(R, func(lo, hi int) {
		var scores []float32
		for i := lo; i < hi; i++ {
			r := rows[i]
			if r.pos+1 <= K {
				continue
			}
			for hd := 0; hd < nI; hd++ {
				m.rope.apply(qI[(i*nI+hd)*dI:(i*nI+hd)*dI+dr], r.pos)
			}
			cached := r.seq.Layer(y.index)
			first := i - (r.pos - cached.Len()) // row index of position cached.Len()
			scores = scores[:0]
			for s := 0; s <= r.pos; s++ {
				var key []float32
				if s < cached.Len() {
					key = cached.Index[s*dI : (s+1)*dI]
				} else {
					j := first + (s - cached.Len())
					key = newKeys[j*dI : (j+1)*dI]
				}
				var score float32
				for hd := 0; hd < nI; hd++ {
					d := kernels.Dot(qI[(i*nI+hd)*dI:(i*nI+hd+1)*dI], key) * kScale
					if d > 0 {
						score += w[i*nI+hd] * d
					}
				}
				scores = append(scores, score)
			}
			sel[i] = topKPositions(scores, K)
		}
	})
	return sel
}

// topKPositions returns the positions of the k largest scores, ties broken
// by the lower position, in ascending position order.
func topKPositions(scores []float32, k int) []int {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return a - b
	})
	out := idx[:k]
	slices.Sort(out)
	return out
}
