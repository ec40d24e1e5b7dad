package model

import (
	"context"

	"github.com/spoolhq/spool/engine/kvcache"
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
	for i := range R {
		rmsNorm(x[i*H:(i+1)*H], h[i*H:(i+1)*H], y.inputNorm, c.RMSNormEps)
	}
	attn := r.attention(y, x, p.rows, p.sel, p.tr)
	for i := range h {
		h[i] += attn[i]
	}
	m.scratch.put(attn)
	if !y.mtp {
		r.prefetchNext(ctx, y, h, R)
	}
	for i := range R {
		rmsNorm(x[i*H:(i+1)*H], h[i*H:(i+1)*H], y.postNorm, c.RMSNormEps)
	}
	ffn, err := r.mlpForward(ctx, y, p)
	if err != nil {
		return err
	}
	for i := range h {
		h[i] += ffn[i]
	}
	return nil
}
