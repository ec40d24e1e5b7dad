package model

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/kernels/gpu"
)

// The backend variants of a layer's steps (layer.forward calls them when
// the forward's pass has a backend): the projections, attention over each
// sequence's cache with o_proj, and the MLP.

// project applies each of ws to the same n rows of x: on the pass's
// backend, or on the CPU.
func (p *pass) project(x []float32, n int, ws []*kernels.Matrix, ys [][]float32) error {
	if p.accel == nil {
		for i, w := range ws {
			kernels.MatMul(ys[i], w, x, n)
		}
		return nil
	}
	if err := p.accel.b.MatMulMany(x, n, ws, ys); err != nil {
		return &backendError{p.accel, err}
	}
	return nil
}

// attendOnBackend writes o_proj of every row's attention into out: one
// backend call per sequence's run of rows over that sequence's cache,
// which already holds the rows. Rows with a DSA selection score only
// their selected keys (or every key, masked, with Options.ComputeAllKeys).
func (r *Runner) attendOnBackend(a *accelerator, y *layer, q []float32, rows []row, sel *selection, out []float32) error {
	m := r.m
	c := m.cfg
	H, nh, dq := c.HiddenSize, c.NumHeads, c.QKHeadDim()
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].seq == rows[start].seq {
			end++
		}
		cache := y.cache(rows[start].seq)
		T := rows[end-1].kv + 1
		call := &gpu.Attention{
			Q: q[start*nh*dq : end*nh*dq], T: T,
			Heads: nh, Nope: c.QKNopeHeadDim, Rope: c.QKRopeHeadDim, Value: c.VHeadDim, Latent: c.KVLoraRank,
			Scale: float32(c.AttentionScale()), KVB: y.kvB, O: y.o,
			Last: make([]int, end-start), MaskKeys: m.allKeys,
		}
		if cache.BF16() {
			call.CacheBF16 = cache.KVBF16(T)
		} else {
			call.Cache = cache.KV(0, T, nil)
		}
		for i := start; i < end; i++ {
			call.Last[i-start] = rows[i].kv
			if keys := sel.row(i); keys != nil {
				if call.Keys == nil {
					call.Keys = make([][]int32, end-start)
				}
				call.Keys[i-start] = keys
			}
		}
		if err := a.b.Attention(out[start*H:end*H], call); err != nil {
			return &backendError{a, err}
		}
		start = end
	}
	return nil
}

// moeOnBackend is moe on the backend: the router, the routed experts of
// every row of the forward (so that each is fetched once) and the shared
// expert, added to the residual stream. The rows' normed inputs are
// written a step at a time into the workspace's acc, which the backend
// then overwrites with the layer's output.
func (r *Runner) moeOnBackend(ctx context.Context, a *accelerator, y *layer, p *pass) error {
	m := r.m
	H, R := m.cfg.HiddenSize, len(p.rows)
	x := r.ws.acc[:R*H]
	p.steps(func(lo, hi int) error {
		r.normRows(x[lo*H:hi*H], p.h[lo*H:hi*H], y.postNorm, hi-lo)
		return nil
	})
	p.clk.lap(stepNorm)
	var fetchErr error
	fetch := func(ids []int) (gpu.Experts, error) {
		if row := m.expertRow[y.index]; row >= 0 {
			for _, e := range ids {
				r.touched.add(row, e, m.cfg.NumRoutedExperts)
			}
		}
		lease, err := m.experts.Acquire(ctx, y.index, ids)
		if err != nil {
			fetchErr = fmt.Errorf("model: layer %d: %w", y.index, err)
			return nil, fetchErr
		}
		return &leaseExperts{ctx: ctx, r: r, lease: lease, layer: y.index, err: &fetchErr}, nil
	}
	routes, err := a.b.MoE(x, x, R, a.moe[y.index], fetch)
	if err != nil {
		if fetchErr != nil { // the experts' source failed, not the backend
			return fetchErr
		}
		return &backendError{a, err}
	}
	r.addRows(p.h, x, R)
	if tr := p.tr; tr != nil {
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
	return nil
}

// leaseExperts delivers a lease's experts to the backend; an error of the
// source is recorded so that it is not taken for a backend failure.
type leaseExperts struct {
	ctx   context.Context
	r     *Runner // records the lease's cost
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
func (l *leaseExperts) Release() {
	l.lease.Release()
	l.r.record(l.lease)
}
