package model

import (
	"context"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/kernels"
)

// A forward is layer-major: it takes every row through one layer before
// the next, keeping from layer to layer only what each row must (its
// residual stream, and the selection DSA's shared layers reuse). Within a
// layer the steps go through the rows a scratch's worth at a time
// (Limits.ScratchRows): norm, attention (each row over its sequence's keys
// written so far, those of the rows before it in the forward included),
// the dense MLP, the router and the shared expert. The routed experts are
// the exception: a layer acquires the union of every row's experts once
// and applies each to all the rows that chose it, so a long prompt
// forwarded as one segment reads each routed expert once per layer.

// pass is what a forward threads through its decoder layers.
type pass struct {
	h    []float32 // [rows × hidden]: the residual stream, updated in place
	rows []row
	// sel is the DSA selection of the most recent full layer (nil: no DSA,
	// as in the MTP layer).
	sel *selection
	tr  *Trace
	// accel is the backend the forward's heavy steps run on, or nil.
	accel *accelerator
	// clk times the forward's steps (Model.SetStepTimes); the parts of a
	// pass share it.
	clk *clock
	// scratch is the most rows a step works on at once.
	scratch int
	// scores, on a full DSA layer with a trace, receives every row's
	// indexer scores (a step fills its rows').
	scores [][]float32
}

// part is the pass of rows [lo, hi) for one step of a layer: its rows,
// their residual stream and their share of the selection.
func (p *pass) part(lo, hi, hidden int) *pass {
	q := *p
	q.h = p.h[lo*hidden : hi*hidden]
	q.rows = p.rows[lo:hi]
	q.sel = p.sel.view(lo, hi)
	if p.scores != nil {
		q.scores = p.scores[lo:hi]
	}
	return &q
}

// steps calls fn on the consecutive ranges of at most p.scratch rows that
// cover the pass's rows, in order; it stops at fn's first error.
func (p *pass) steps(fn func(lo, hi int) error) error {
	for lo := 0; lo < len(p.rows); lo += p.scratch {
		if err := fn(lo, min(lo+p.scratch, len(p.rows))); err != nil {
			return err
		}
	}
	return nil
}

// cache returns where layer y keeps the state of sequence s: its own layer
// cache, or the MTP layer's cache for the MTP block.
func (y *layer) cache(s *kvcache.Sequence) *kvcache.Layer {
	if y.mtp {
		return s.MTP()
	}
	return s.Layer(y.index)
}

// forward runs decoder layer y over the rows of p: h += attention(norm(h)),
// then h += mlp(norm(h)), the MLP dense or shared + routed experts. The main
// stack and the MTP layer both run their layers through it.
func (y *layer) forward(ctx context.Context, r *Runner, p *pass) error {
	m := r.m
	H, R := m.cfg.HiddenSize, len(p.rows)
	if y.fullDSA && p.sel != nil {
		// Every row attends densely until its step selects; a forward
		// whose rows all have at most index_topk keys selects nothing.
		if selects(p.rows, m.cfg.IndexTopK) {
			p.sel.reset(R)
		} else {
			p.sel.rows = p.sel.rows[:0]
		}
		if p.tr != nil {
			p.scores = make([][]float32, R)
		}
	}
	err := p.steps(func(lo, hi int) error {
		n := hi - lo
		q := p.part(lo, hi, H)
		x := r.ws.x[:n*H]
		r.normRows(x, q.h, y.inputNorm, n)
		p.clk.lap(stepNorm)
		attn, err := r.attention(y, x, q)
		if err != nil {
			return err
		}
		r.addRows(q.h, attn, n)
		m.scratch.put(attn)
		p.clk.lap(stepNorm)
		return nil
	})
	if err != nil {
		return err
	}
	if y.fullDSA && p.tr != nil && p.sel != nil {
		recordDSA(p.tr, y.index, p.sel, R, p.scores)
		p.scores = nil
	}
	if !y.mtp {
		r.prefetchNext(ctx, y, p.h, R)
		p.clk.lap(stepPrefetch)
	}
	if err := r.mlpForward(ctx, y, p); err != nil {
		return err
	}
	p.clk.lap(stepMLP)
	return nil
}

// addRows adds the R rows of d to h, rows spread over the runner's
// workers.
func (r *Runner) addRows(h, d []float32, R int) {
	H := r.m.cfg.HiddenSize
	parallelFor(len(r.attn.workers), R, R*H, func(_, lo, hi int) {
		kernels.Add(h[lo*H:hi*H], d[lo*H:hi*H])
	})
}

// normRows writes the RMSNorm (weights w) of each of the R rows of h into
// dst, rows spread over the runner's workers. dst may be h.
func (r *Runner) normRows(dst, h, w []float32, R int) {
	H, eps := r.m.cfg.HiddenSize, r.m.cfg.RMSNormEps
	parallelFor(len(r.attn.workers), R, 2*R*H, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			rmsNorm(dst[i*H:(i+1)*H], h[i*H:(i+1)*H], w, eps)
		}
	})
}

// selects reports whether some row has more than k causal keys, so that
// a full DSA layer selects its keys.
func selects(rows []row, k int) bool {
	for _, r := range rows {
		if r.pos+1 > k {
			return true
		}
	}
	return false
}
