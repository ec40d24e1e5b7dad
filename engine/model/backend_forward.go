package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/kernels/gpu"
)

// attend runs a layer's attention for the rows on the backend when the
// forward is large enough, else on the CPU.
func (m *Model) attend(y *layer, x []float32, rows []row, cacheOf func(*kvcache.Sequence) *kvcache.Layer, sel [][]int) ([]float32, [][]int, error) {
	if !m.onBackend(len(rows)) {
		out, sel := m.attention(y, x, rows, cacheOf, sel)
		return out, sel, nil
	}
	return m.attentionOnBackend(y, x, rows, cacheOf, sel)
}

// attentionOnBackend is attention with the projections and the attention
// of each sequence's rows on the backend. The norms, RoPE, the cache
// appends and the DSA indexer run on the CPU exactly as in attention.
func (m *Model) attentionOnBackend(y *layer, x []float32, rows []row, cacheOf func(*kvcache.Sequence) *kvcache.Layer, sel [][]int) ([]float32, [][]int, error) {
	c := m.cfg
	b := m.accel.b
	H, R := c.HiddenSize, len(rows)
	nh, dn, dr, dv, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	dq, W := dn+dr, rkv+dr

	cq := m.scratch.get(R * c.QLoraRank)
	defer m.scratch.put(cq)
	kv := m.scratch.get(R * W)
	defer m.scratch.put(kv)
	if err := b.MatMulMany(x, R, []*kernels.Matrix{y.qA, y.kvA}, [][]float32{cq, kv}); err != nil {
		return nil, nil, &backendError{err}
	}
	// The norms and RoPE run on the CPU, row by row in parallel, with each
	// row's rotations computed once for all its heads (the same values
	// rope.apply computes).
	half := dr / 2
	rot := m.scratch.get(R * 2 * half)
	defer m.scratch.put(rot)
	parallelFor(R, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			cs := rot[i*2*half : (i+1)*2*half]
			p := float32(rows[i].pos)
			for j := 0; j < half; j++ {
				angle := p * m.rope.invFreq[j]
				cs[2*j] = float32(math.Cos(float64(angle)))
				cs[2*j+1] = float32(math.Sin(float64(angle)))
			}
			v := cq[i*c.QLoraRank : (i+1)*c.QLoraRank]
			rmsNorm(v, v, y.qANorm, 1e-6)
			k := kv[i*W : (i+1)*W]
			rmsNorm(k[:rkv], k[:rkv], y.kvANorm, 1e-6)
			rotate(k[rkv:], cs)
		}
	})
	q := m.scratch.get(R * nh * dq)
	defer m.scratch.put(q)
	if err := b.MatMulMany(cq, R, []*kernels.Matrix{y.qB}, [][]float32{q}); err != nil {
		return nil, nil, &backendError{err}
	}
	parallelFor(R, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			cs := rot[i*2*half : (i+1)*2*half]
			for hd := 0; hd < nh; hd++ {
				off := i*nh*dq + hd*dq + dn
				rotate(q[off:off+dr], cs)
			}
		}
	})
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

	out := m.scratch.get(R * H) // the caller puts it back
	scale := float32(c.AttentionScale())
	for start := 0; start < R; {
		end := start + 1
		for end < R && rows[end].seq == rows[start].seq {
			end++
		}
		cache := cacheOf(rows[start].seq)
		a := &gpu.Attention{
			Q: q[start*nh*dq : end*nh*dq], Cache: cache.KV, T: rows[end-1].kv + 1,
			Heads: nh, Nope: dn, Rope: dr, Value: dv, Latent: rkv, Scale: scale,
			KVB: y.kvB, O: y.o,
			Last: make([]int, end-start),
		}
		for i := start; i < end; i++ {
			a.Last[i-start] = rows[i].kv
			if keys := keysOf(sel, i); keys != nil {
				if a.Keys == nil {
					a.Keys = make([][]int, end-start)
				}
				a.Keys[i-start] = keys
			}
		}
		if err := b.Attention(out[start*H:end*H], a); err != nil {
			m.scratch.put(out)
			return nil, nil, &backendError{err}
		}
		start = end
	}
	return out, sel, nil
}

// rotate applies RoPE to the interleaved pairs of x with the rotations cs
// (cos, sin per pair), as rope.apply does.
func rotate(x, cs []float32) {
	for j := 0; j < len(cs)/2; j++ {
		c, s := cs[2*j], cs[2*j+1]
		a, b := x[2*j], x[2*j+1]
		x[2*j] = a*c - b*s
		x[2*j+1] = b*c + a*s
	}
}

// mlpOnBackend is mlpForward on the backend: the dense MLP, or the router,
// the routed experts of every row and the shared expert.
func (m *Model) mlpOnBackend(ctx context.Context, y *layer, x []float32, R int, tr *Trace) ([]float32, error) {
	b := m.accel.b
	out := m.scratch.get(R * m.cfg.HiddenSize) // the caller puts it back
	if !y.isSparse {
		if err := b.MLP(out, &gpu.MLP{Gate: y.dense.gate, Up: y.dense.up, Down: y.dense.down}, x, R); err != nil {
			m.scratch.put(out)
			return nil, &backendError{err}
		}
		return out, nil
	}
	var fetchErr error
	fetch := func(ids []int) (gpu.Experts, error) {
		lease, err := m.experts.Acquire(ctx, y.index, ids)
		if err != nil {
			fetchErr = fmt.Errorf("model: layer %d: %w", y.index, err)
			return nil, fetchErr
		}
		return &leaseExperts{ctx: ctx, lease: lease, layer: y.index, err: &fetchErr}, nil
	}
	routes, err := b.MoE(out, x, R, m.accel.moe[y.index], fetch)
	if err != nil {
		m.scratch.put(out)
		if fetchErr != nil { // the experts' source failed, not the backend
			return nil, fetchErr
		}
		return nil, &backendError{err}
	}
	if tr != nil {
		k := m.cfg.ExpertsPerToken
		if tr.Routes == nil {
			tr.Routes = map[int][][]int{}
			tr.RouteWeights = map[int][][]float32{}
		}
		ids := make([][]int, R)
		ws := make([][]float32, R)
		for i := range ids {
			ids[i] = make([]int, k)
			for j := range ids[i] {
				ids[i][j] = int(routes.IDs[i*k+j])
			}
			ws[i] = routes.Weights[i*k : (i+1)*k]
		}
		tr.Routes[y.index], tr.RouteWeights[y.index] = ids, ws
	}
	return out, nil
}

// leaseExperts delivers a lease's experts to the backend; an error of the
// source is recorded so that it is not taken for a backend failure.
type leaseExperts struct {
	ctx   context.Context
	lease experts.Lease
	layer int
	err   *error
}

func (l *leaseExperts) Next() (int, gpu.MLP, error) {
	idx, ex, err := l.lease.Next(l.ctx)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			err = fmt.Errorf("model: layer %d: %w", l.layer, err)
			*l.err = err
		}
		return 0, gpu.MLP{}, err
	}
	return idx, gpu.MLP{Gate: ex.Gate, Up: ex.Up, Down: ex.Down}, nil
}

func (l *leaseExperts) Done(idx int) { l.lease.Done(idx) }
func (l *leaseExperts) Release()     { l.lease.Release() }
