package plan

import (
	"fmt"
	"math/bits"
)

// ItemAttention is the attention workspace line.
const ItemAttention = "attention workspace"

// untiledAttentionItems counts the buffers of today's engine/model
// attention (MLA with scores over every cached key, the DSA indexer with a
// full top-k) for a forward of s.Rows rows whose prompt chunk of s.Chunk
// rows attends to up to s.Context keys: the projections of every row; in
// the absorbed form (decode rows) per worker a query, a latent, the scores
// and the gathered keys; in the expanded form (the chunk) the latents and
// per-head keys and values of the whole context, and per worker keys,
// transposed values, queries, a chunk x context score matrix and outputs;
// with DSA the indexer's queries, weights and keys, per worker its scores,
// and two layers' selections (a context of positions per row). Attention's
// scratch rounds each buffer up to a power of two. The tiled attention
// replaces this line with its own (engine/plan/attention.go).
func untiledAttentionItems(s Shape) []Item {
	c := s.Config
	R, S, T := int64(s.Rows), int64(s.Chunk), int64(s.Context)
	nh, dn, dr, dv, rkv := int64(c.NumHeads), int64(c.QKNopeHeadDim), int64(c.QKRopeHeadDim), int64(c.VHeadDim), int64(c.KVLoraRank)
	dq, W, H := dn+dr, rkv+dr, int64(c.HiddenSize)
	workers := func(jobs int64) int64 {
		if jobs < 32 { // model.minParallelJobs
			return 1
		}
		return min(int64(s.Threads), jobs)
	}
	floats := pow2(R*int64(c.QLoraRank)) + pow2(R*nh*dq) + pow2(R*W) + pow2(R*nh*dv) + pow2(R*H)
	decodeRows := max(R-S, 2)
	floats += workers(decodeRows*nh) * (pow2(W) + pow2(rkv) + pow2(T) + pow2(T*W))
	if S > 4 { // model.absorbedMaxRows
		floats += pow2(T*rkv) + pow2(T*nh*(dn+dv))
		floats += workers(nh) * (pow2(T*dq) + pow2(dv*T) + pow2(S*dq) + pow2(S*T) + pow2(S*dv))
	}
	bytes := f32Bytes * floats
	dsa := ""
	if s.DSA {
		nI, dI := int64(c.IndexNHeads), int64(c.IndexHeadDim)
		bytes += f32Bytes*(R*dI+R*nI*dI+R*nI) + workers(R)*2*f32Bytes*T + 2*R*(T*intBytes+sliceHeader)
		dsa = ", the DSA indexer's scores and two layers' selections"
	}
	return []Item{{ItemAttention, bytes,
		fmt.Sprintf("attention of a %d-row forward over %d keys: projections, per-head keys and values of the context, a %d x %d score matrix per worker%s (untiled)", s.Rows, s.Context, s.Chunk, s.Context, dsa)}}
}

// pow2 is n rounded up to a power of two.
func pow2(n int64) int64 {
	if n <= 1 {
		return n
	}
	return 1 << bits.Len64(uint64(n-1))
}
