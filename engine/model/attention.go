package model

import (
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/kernels"
)

// absorbedMaxRows is the longest run of one sequence's rows that attention
// computes in the absorbed form (queries mapped into the latent space, one
// dot product per cached key). Longer runs (prefill chunks) expand keys and
// values per head once and use matrix products. The choice depends only on
// the run length of a sequence, never on other sequences in the batch, so a
// sequence's rows give the same numbers whatever it is batched with; and
// speculative verification (two rows) computes exactly what single-token
// decode computes.
const absorbedMaxRows = 4

// attention runs MLA for every row: it appends each row's compressed KV
// (normalized latent, roped shared key) to its sequence's cache, then lets
// each row attend over its sequence's cache entries 0..kv (or its DSA
// selection), and returns o_proj of the heads' outputs.
//
// On a full DSA layer it first computes the rows' top-k selection, which it
// returns for the shared layers that follow; otherwise it returns sel.
func (m *Model) attention(y *layer, x []float32, rows []row, cacheOf func(*kvcache.Sequence) *kvcache.Layer, sel [][]int) ([]float32, [][]int) {
	c := m.cfg
	H, R := c.HiddenSize, len(rows)
	nh, dn, dr, dv, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	dq, W := dn+dr, rkv+dr

	cq := m.scratch.get(R * c.QLoraRank)
	defer m.scratch.put(cq)
	kernels.MatMul(cq, y.qA, x, R)
	for i := 0; i < R; i++ {
		v := cq[i*c.QLoraRank : (i+1)*c.QLoraRank]
		rmsNorm(v, v, y.qANorm, 1e-6)
	}
	q := m.scratch.get(R * nh * dq)
	defer m.scratch.put(q)
	kernels.MatMul(q, y.qB, cq, R)
	kv := m.scratch.get(R * W)
	defer m.scratch.put(kv)
	kernels.MatMul(kv, y.kvA, x, R)
	for i, r := range rows {
		for hd := 0; hd < nh; hd++ {
			off := i*nh*dq + hd*dq + dn
			m.rope.apply(q[off:off+dr], r.pos)
		}
		k := kv[i*W : (i+1)*W]
		rmsNorm(k[:rkv], k[:rkv], y.kvANorm, 1e-6)
		m.rope.apply(k[rkv:], r.pos)
	}
	// Indexer keys (full DSA layers only) enter the cache with the rows;
	// then each row's selection scores the cached keys 0..pos.
	var idxKeys []float32
	if y.indexer != nil {
		idxKeys = m.indexerKeys(y, x, rows)
	}
	for i, r := range rows {
		var ik []float32
		if idxKeys != nil {
			ik = idxKeys[i*c.IndexHeadDim : (i+1)*c.IndexHeadDim]
		}
		cacheOf(r.seq).Append(kv[i*W:(i+1)*W], ik)
	}
	if y.indexer != nil {
		sel = m.indexerSelect(y, x, cq, rows)
	}

	ctx := m.scratch.get(R * nh * dv) // every head of every row is written
	defer m.scratch.put(ctx)
	for start := 0; start < R; {
		end := start + 1
		for end < R && rows[end].seq == rows[start].seq {
			end++
		}
		if end-start <= absorbedMaxRows {
			m.attendAbsorbed(y, q, rows, sel, cacheOf, start, end, ctx)
		} else {
			m.attendExpanded(y, q, rows, sel, cacheOf, start, end, ctx)
		}
		start = end
	}
	out := m.scratch.get(R * H) // the caller puts it back
	kernels.MatMul(out, y.o, ctx, R)
	return out, sel
}

// attendAbsorbed computes rows [start, end) of one sequence head by head in
// the latent space: q_abs = W_K^T q_nope scores each cached [latent | rope]
// row with one dot product, the probabilities weight the latents, and W_V
// maps the result back.
func (m *Model) attendAbsorbed(y *layer, q []float32, rows []row, sel [][]int, cacheOf func(*kvcache.Sequence) *kvcache.Layer, start, end int, ctx []float32) {
	c := m.cfg
	nh, dn, dr, dv, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	dq, W := dn+dr, rkv+dr
	scale := float32(c.AttentionScale())
	cache := cacheOf(rows[start].seq)
	parallelFor((end-start)*nh, func(lo, hi int) {
		qcat := m.scratch.get(W)
		clat := m.scratch.get(rkv)
		scores := m.scratch.get(cache.Len())
		gathered := m.scratch.get(cache.Len() * W)
		defer func() {
			m.scratch.put(qcat)
			m.scratch.put(clat)
			m.scratch.put(scores)
			m.scratch.put(gathered)
		}()
		gatheredRow := -1 // the row whose selected keys gathered holds
		for job := lo; job < hi; job++ {
			i, hd := start+job/nh, job%nh
			r := rows[i]
			qh := q[i*nh*dq+hd*dq : i*nh*dq+(hd+1)*dq]
			kernels.VecMat(qcat[:rkv], y.kvB.RowRange(hd*(dn+dv), hd*(dn+dv)+dn), qh[:dn])
			copy(qcat[rkv:], qh[dn:])
			n := r.kv + 1
			scores = grow(scores, n)
			kernels.DotRows(scores, qcat, cache.KV, W)
			if keys := keysOf(sel, i); keys != nil {
				// keys ascend, so keys[j] >= j: writing slot j never
				// clobbers a score still to be read.
				for j, s := range keys {
					scores[j] = scores[s] * scale
				}
				scores = scores[:len(keys)]
				softmaxInPlace(scores)
				if gatheredRow != i { // the heads of a row share its keys
					gathered = grow(gathered, len(keys)*W)
					for j, s := range keys {
						copy(gathered[j*W:(j+1)*W], cache.KV[s*W:(s+1)*W])
					}
					gatheredRow = i
				}
				kernels.WeightedSum(clat, scores, gathered, W)
			} else {
				for j := range scores {
					scores[j] *= scale
				}
				softmaxInPlace(scores)
				kernels.WeightedSum(clat, scores, cache.KV, W)
			}
			wv := y.kvB.RowRange(hd*(dn+dv)+dn, (hd+1)*(dn+dv))
			kernels.MatVec(ctx[(i*nh+hd)*dv:(i*nh+hd+1)*dv], wv, clat)
		}
	})
}

// attendExpanded computes rows [start, end) of one sequence with keys and
// values expanded per head: kv_b maps every cached latent to [k_nope | v]
// for all heads in one product, then per head the scores and the weighted
// values are two matrix products.
func (m *Model) attendExpanded(y *layer, q []float32, rows []row, sel [][]int, cacheOf func(*kvcache.Sequence) *kvcache.Layer, start, end int, ctx []float32) {
	c := m.cfg
	nh, dn, dr, dv, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	dq, W := dn+dr, rkv+dr
	scale := float32(c.AttentionScale())
	cache := cacheOf(rows[start].seq)
	S := end - start
	T := rows[end-1].kv + 1 // keys visible to the last row

	latent := m.scratch.get(T * rkv)
	defer m.scratch.put(latent)
	for t := 0; t < T; t++ {
		copy(latent[t*rkv:(t+1)*rkv], cache.KV[t*W:t*W+rkv])
	}
	hw := dn + dv
	expanded := m.scratch.get(T * nh * hw) // [T][head][k_nope | v]
	defer m.scratch.put(expanded)
	kernels.MatMul(expanded, y.kvB, latent, T)

	parallelFor(nh, func(lo, hi int) {
		keys := m.scratch.get(T * dq)    // [T][k_nope | k_rope]
		valsT := m.scratch.get(dv * T)   // [dv][T]
		queries := m.scratch.get(S * dq) // [S][q_nope | q_rope]
		scores := m.scratch.get(S * T)
		out := m.scratch.get(S * dv)
		defer func() {
			for _, b := range [][]float32{keys, valsT, queries, scores, out} {
				m.scratch.put(b)
			}
		}()
		for hd := lo; hd < hi; hd++ {
			for t := 0; t < T; t++ {
				e := expanded[(t*nh+hd)*hw : (t*nh+hd+1)*hw]
				copy(keys[t*dq:t*dq+dn], e[:dn])
				copy(keys[t*dq+dn:(t+1)*dq], cache.KV[t*W+rkv:(t+1)*W])
				for d, v := range e[dn:] {
					valsT[d*T+t] = v
				}
			}
			for s := 0; s < S; s++ {
				i := start + s
				copy(queries[s*dq:(s+1)*dq], q[i*nh*dq+hd*dq:i*nh*dq+(hd+1)*dq])
			}
			kernels.MatMul(scores, &kernels.Matrix{Format: kernels.F32, Rows: T, Cols: dq, F32: keys}, queries, S)
			for s := 0; s < S; s++ {
				i := start + s
				row := scores[s*T : (s+1)*T]
				maskScores(row, keysOf(sel, i), rows[i].kv, scale)
			}
			kernels.MatMul(out, &kernels.Matrix{Format: kernels.F32, Rows: dv, Cols: T, F32: valsT}, scores, S)
			for s := 0; s < S; s++ {
				i := start + s
				copy(ctx[(i*nh+hd)*dv:(i*nh+hd+1)*dv], out[s*dv:(s+1)*dv])
			}
		}
	})
}

// maskScores scales a row of raw scores over keys 0..len-1, keeps only the
// allowed keys (0..kv, or the DSA selection) and turns them into
// probabilities; excluded keys get probability 0.
func maskScores(row []float32, keys []int, kv int, scale float32) {
	if keys == nil {
		for t := range row {
			if t <= kv {
				row[t] *= scale
			} else {
				row[t] = float32(math.Inf(-1))
			}
		}
	} else {
		k := 0
		for t := range row {
			if k < len(keys) && keys[k] == t {
				row[t] *= scale
				k++
			} else {
				row[t] = float32(math.Inf(-1))
			}
		}
	}
	softmaxInPlace(row)
}

// keysOf returns the key positions row i attends to, or nil for dense
// causal attention over its cache entries.
func keysOf(sel [][]int, i int) []int {
	if sel == nil || sel[i] == nil {
		return nil
	}
	return sel[i]
}

// minParallelJobs is the fewest jobs (a head of a row, a row of the
// indexer) worth spreading over goroutines.
const minParallelJobs = 32

// parallelFor splits [0, n) into contiguous chunks run on up to GOMAXPROCS
// goroutines and waits for them. Results must not depend on the split.
// Below minParallelJobs jobs it runs inline: starting goroutines costs more
// than a few heads of one token.
func parallelFor(n int, body func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if n < minParallelJobs {
		workers = 1
	}
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
// latent cq; the keys come from the layer cache, which already holds this
// forward's rows.
func (m *Model) indexerSelect(y *layer, x, cq []float32, rows []row) [][]int {
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
	parallelFor(R, func(lo, hi int) {
		var scores, dots []float32
		for i := lo; i < hi; i++ {
			r := rows[i]
			if r.pos+1 <= K {
				continue
			}
			n := r.pos + 1
			scores = grow(scores, n)
			dots = grow(dots, n)
			clear(scores)
			for hd := 0; hd < nI; hd++ {
				qh := qI[(i*nI+hd)*dI : (i*nI+hd+1)*dI]
				m.rope.apply(qh[:dr], r.pos)
				kernels.DotRows(dots, qh, r.seq.Layer(y.index).Index, dI)
				wh := w[i*nI+hd]
				for s, d := range dots {
					if d *= kScale; d > 0 {
						scores[s] += wh * d
					}
				}
			}
			sel[i] = topKPositions(scores, K)
		}
	})
	return sel
}

// grow returns s resized to n values (contents unspecified).
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
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
