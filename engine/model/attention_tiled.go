package model

import (
	"math"

	"github.com/spoolhq/spool/kernels"
)

// The expanded form, for the dense rows of a long run (a prefill chunk).
// Each worker takes whole heads. For a head it walks the cached keys tile
// by tile: kv_b's rows of that head expand the tile's latents to
// [k_nope | v], one matrix product scores every row of the block against
// the tile, an online softmax turns the scores into weights carrying each
// row's max and sum from tile to tile, and a second product weights the
// values. Rows go in blocks of the workspace's rows; a row's numbers do
// not depend on the block it is in beyond which keys the block's tiles
// end at.

// attendTiled computes rows [start, end) of one sequence, whose positions
// ascend, in the expanded form.
func (m *Model) attendTiled(y *layer, q []float32, rows []row, sel *selection, start, end int, heads []float32) {
	c := m.cfg
	nh := c.NumHeads
	T := rows[end-1].kv + 1
	work := (end - start) * T * nh * (c.QKHeadDim() + c.VHeadDim)
	block := m.attn.layout.BlockRows
	parallelFor(len(m.attn.workers), nh, work, func(w, h0, h1 int) {
		wk := &m.attn.workers[w]
		for h := h0; h < h1; h++ {
			for b0 := start; b0 < end; b0 += block {
				m.tiledBlock(y, q, rows, sel, b0, min(b0+block, end), h, wk, heads)
			}
		}
	})
}

// tiledBlock computes head h of rows [b0, b1) over their keys.
func (m *Model) tiledBlock(y *layer, q []float32, rows []row, sel *selection, b0, b1, h int, wk *attnWorker, heads []float32) {
	c := m.cfg
	nh, dn, dr, dv, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	dq, W, hw := dn+dr, rkv+dr, dn+dv
	scale := float32(c.AttentionScale())
	cache := m.layerCache(y, rows[b0].seq).KV
	S := b1 - b0
	T := rows[b1-1].kv + 1
	outOf := func(s int) []float32 { i := b0 + s; return heads[(i*nh+h)*dv : (i*nh+h+1)*dv] }

	queries := wk.queries[:S*dq]
	for s := range S {
		i := b0 + s
		copy(queries[s*dq:(s+1)*dq], q[i*nh*dq+h*dq:i*nh*dq+(h+1)*dq])
		clear(outOf(s))
		wk.rowMax[s] = float32(math.Inf(-1))
		wk.rowSum[s] = 0
	}
	kvB := y.kvB.RowRange(h*hw, (h+1)*hw)
	first := 0 // rows [first, S) have keys in the tile
	tile := m.attn.layout.ExpandedTile
	for t0 := 0; t0 < T; t0 += tile {
		t1 := min(t0+tile, T)
		nt := t1 - t0
		for first < S && rows[b0+first].kv < t0 {
			first++
		}
		lat := wk.latent[:nt*rkv]
		for t := range nt {
			copy(lat[t*rkv:(t+1)*rkv], cache[(t0+t)*W:(t0+t)*W+rkv])
		}
		expanded := wk.expand[:nt*hw]
		kernels.MatMulThreads(expanded, kvB, lat, nt, 1)
		keys, valsT := wk.keys[:nt*dq], wk.valsT[:dv*nt]
		for t := range nt {
			e := expanded[t*hw : (t+1)*hw]
			copy(keys[t*dq:t*dq+dn], e[:dn])
			copy(keys[t*dq+dn:(t+1)*dq], cache[(t0+t)*W+rkv:(t0+t+1)*W])
			for d, v := range e[dn:] {
				valsT[d*nt+t] = v
			}
		}

		n := S - first
		probs := wk.probs[:n*nt]
		kernels.MatMulThreads(probs, &kernels.Matrix{Format: kernels.F32, Rows: nt, Cols: dq, F32: keys}, queries[first*dq:], n, 1)
		for s := first; s < S; s++ {
			i := b0 + s
			p := probs[(s-first)*nt : (s-first+1)*nt]
			for j := range p {
				if t0+j > rows[i].kv {
					p[j] = float32(math.Inf(-1))
				} else {
					p[j] *= scale
				}
			}
			if ks := m.keysOf(rows, sel, i); ks.mask {
				maskTile(p, ks.list, t0)
			}
			if alpha := onlineStep(p, &wk.rowMax[s], &wk.rowSum[s]); alpha != 1 {
				kernels.Scale(outOf(s), alpha)
			}
		}
		out := wk.out[:n*dv]
		kernels.MatMulThreads(out, &kernels.Matrix{Format: kernels.F32, Rows: dv, Cols: nt, F32: valsT}, probs, n, 1)
		for s := first; s < S; s++ {
			kernels.Add(outOf(s), out[(s-first)*dv:(s-first+1)*dv])
		}
	}
	for s := range S {
		kernels.Scale(outOf(s), float32(1/wk.rowSum[s]))
	}
}
