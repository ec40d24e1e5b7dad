package model

import (
	"context"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/kernels"
)

// pass is what a forward threads through its decoder layers.
type pass struct {
	h    []float32 // [rows × hidden]: the residual stream, updated in place
	x    []float32 // [rows × hidden]: the normed input of the current block
	rows []row
	// sel is the DSA selection of the most recent full layer (nil: no DSA,
	// as in the MTP layer).
	sel *selection
	tr  *Trace
	// accel is the backend the forward's heavy steps run on, or nil.
	accel *accelerator
	// clk times the forward's steps (Model.SetStepTimes).
	clk clock
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
	c := m.cfg
	H, R := c.HiddenSize, len(p.rows)
	h, x := p.h[:R*H], p.x[:R*H]
	r.normRows(x, h, y.inputNorm, R)
	p.clk.lap(stepNorm)
	attn, err := r.attention(y, x, p)
	if err != nil {
		return err
	}
	r.addRows(h, attn, R)
	m.scratch.put(attn)
	p.clk.lap(stepNorm)
	if !y.mtp {
		r.prefetchNext(ctx, y, h, R)
		p.clk.lap(stepPrefetch)
	}
	r.normRows(x, h, y.postNorm, R)
	p.clk.lap(stepNorm)
	ffn, err := r.mlpForward(ctx, y, p)
	if err != nil {
		return err
	}
	p.clk.lap(stepMLP)
	r.addRows(h, ffn, R)
	p.clk.lap(stepNorm)
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
// dst, rows spread over the runner's workers.
func (r *Runner) normRows(dst, h, w []float32, R int) {
	H, eps := r.m.cfg.HiddenSize, r.m.cfg.RMSNormEps
	parallelFor(len(r.attn.workers), R, 2*R*H, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			rmsNorm(dst[i*H:(i+1)*H], h[i*H:(i+1)*H], w, eps)
		}
	})
}
