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

// tiled computes rows [start, end) of one sequence, whose positions
// ascend, in the expanded form.
func (a *attnCall) tiled(start, end int) {
	c, ws := a.m.cfg, a.ws
	T := a.rows[end-1].kv + 1
	work := (end - start) * T * c.NumHeads * (c.QKHeadDim() + c.VHeadDim)
	block := ws.layout.BlockRows
	parallelFor(len(ws.workers), c.NumHeads, work, func(w, h0, h1 int) {
		for h := h0; h < h1; h++ {
			for b0 := start; b0 < end; b0 += block {
				a.tiledBlock(rowBlock{b0, min(b0+block, end), h}, &ws.workers[w])
			}
		}
	})
}

// rowBlock is head h of rows [b0, b1) of one sequence.
type rowBlock struct{ b0, b1, h int }

// tiledBlock computes one head of a block of rows over their keys.
func (a *attnCall) tiledBlock(blk rowBlock, wk *attnWorker) {
	c := a.m.cfg
	dn, dv, rkv := c.QKNopeHeadDim, c.VHeadDim, c.KVLoraRank
	dq, W, hw := c.QKHeadDim(), rkv+c.QKRopeHeadDim, dn+dv
	scale := float32(c.AttentionScale())
	rows, b0, h := a.rows, blk.b0, blk.h
	cache := a.cache(b0)
	S := blk.b1 - b0
	T := rows[blk.b1-1].kv + 1

	queries := wk.queries[:S*dq]
	for s := range S {
		copy(queries[s*dq:(s+1)*dq], a.query(b0+s, h))
		clear(a.out(b0+s, h))
		wk.rowMax[s] = float32(math.Inf(-1))
		wk.rowSum[s] = 0
	}
	kvB := a.y.kvB.RowRange(h*hw, (h+1)*hw)
	tile := a.ws.layout.ExpandedTile
	first := 0 // rows [first, S) have keys in the tile
	for t0 := 0; t0 < T; t0 += tile {
		t1 := min(t0+tile, T)
		nt := t1 - t0
		for first < S && rows[b0+first].kv < t0 {
			first++
		}
		kv := cache.KV(t0, t1, wk.kvTile)
		lat := wk.latent[:nt*rkv]
		for t := range nt {
			copy(lat[t*rkv:(t+1)*rkv], kv[t*W:t*W+rkv])
		}
		expanded := wk.expand[:nt*hw]
		kernels.MatMulThreads(expanded, kvB, lat, nt, 1)
		keys, valsT := wk.keys[:nt*dq], wk.valsT[:dv*nt]
		for t := range nt {
			e := expanded[t*hw : (t+1)*hw]
			copy(keys[t*dq:t*dq+dn], e[:dn])
			copy(keys[t*dq+dn:(t+1)*dq], kv[t*W+rkv:(t+1)*W])
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
			if ks := a.keysOf(i); ks.mask {
				maskTile(p, ks.list, t0)
			}
			if alpha := onlineStep(p, &wk.rowMax[s], &wk.rowSum[s]); alpha != 1 {
				kernels.Scale(a.out(i, h), alpha)
			}
		}
		out := wk.out[:n*dv]
		kernels.MatMulThreads(out, &kernels.Matrix{Format: kernels.F32, Rows: dv, Cols: nt, F32: valsT}, probs, n, 1)
		for s := first; s < S; s++ {
			kernels.Add(a.out(b0+s, h), out[(s-first)*dv:(s-first+1)*dv])
		}
	}
	for s := range S {
		kernels.Scale(a.out(b0+s, h), float32(1/wk.rowSum[s]))
	}
}
