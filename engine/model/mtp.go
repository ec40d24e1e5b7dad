package model

import (
	"context"
	"fmt"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/kernels"
)

// MTPRequest is one sequence's rows for the multi-token-prediction layer.
// Row j consumes the final-normed main-model hidden state Hidden[j] of
// position p = Pos+j and the token Next[j] at position p+1; its logits
// predict the token at p+2. Hidden may be a previous forward's output.
type MTPRequest struct {
	Seq    *kvcache.Sequence
	Pos    int
	Hidden [][]float32
	Next   []int
	// LastOnly asks for the logits of the last row only.
	LastOnly bool
}

// MTPForward is Runner.MTPForward with the model's own runner (see
// Forward).
func (m *Model) MTPForward(ctx context.Context, req MTPRequest) (logits, out [][]float32, err error) {
	r := m.ownRunner()
	defer m.mu.Unlock()
	return r.MTPForward(ctx, req)
}

// MTPForward runs the multi-token-prediction layer over req's rows, which
// must continue the sequence's MTP cache (req.Pos is its MTPEnd). The MTP
// layer attends densely over its own cache (the rows absorbed so far), to
// which the rows are appended. It goes through the rows as Forward goes
// through a layer (a scratch's worth at a time, the routed experts applied
// to every row at once), with a residual stream of its own. It returns the
// logits of every row (or of the last row only, with LastOnly) and the
// layer's output hidden states (pre shared_head.norm) of every row; both
// are views of r's buffers, valid until r's next forward. The hidden
// states of r's latest Forward stay valid through it (its logits do not);
// req.Hidden must not be the output rows of an earlier MTPForward of r.
func (r *Runner) MTPForward(ctx context.Context, req MTPRequest) (logits, out [][]float32, err error) {
	m := r.m
	seq, pos0, hidden, next, lastOnly := req.Seq, req.Pos, req.Hidden, req.Next, req.LastOnly
	if m.mtp == nil {
		return nil, nil, errNoMTP
	}
	if len(hidden) != len(next) || len(next) == 0 {
		return nil, nil, fmt.Errorf("model: MTP needs one hidden state per token (%d hidden, %d tokens)", len(hidden), len(next))
	}
	if end := seq.MTPEnd(); pos0 != end {
		return nil, nil, fmt.Errorf("model: MTP rows from position %d do not continue the MTP cache, which ends at %d", pos0, end)
	}
	c := m.cfg
	H, R := c.HiddenSize, len(next)
	first := 0
	if lastOnly {
		first = R - 1
	}
	if err := r.ws.reserve(R, R-first); err != nil {
		return nil, nil, err
	}
	ws := r.ws
	base := seq.MTP().Len()
	rows := ws.rowState[:R]
	for j, t := range next {
		if t < 0 || t >= c.VocabSize {
			return nil, nil, fmt.Errorf("model: token id %d is outside the vocabulary (%d)", t, c.VocabSize)
		}
		if len(hidden[j]) != H {
			return nil, nil, fmt.Errorf("model: MTP hidden state %d has %d values, want %d", j, len(hidden[j]), H)
		}
		rows[j] = row{seq: seq, pos: pos0 + j, kv: base + j, token: t}
	}
	r.touched.Clear()
	r.startCost()
	p := pass{h: ws.mtpH[:R*H], rows: rows, accel: m.backendFor(R), clk: &clock{}, scratch: ws.scratch}
	// The layer's input, a step at a time: eh_proj of the normed embedding
	// of the next token beside the normed hidden state.
	input := func() error {
		return p.steps(func(lo, hi int) error {
			n := hi - lo
			cat := ws.cat[:n*2*H]
			for j := lo; j < hi; j++ {
				o := (j - lo) * 2 * H
				if err := m.embed.row(ws.emb, next[j]); err != nil {
					return err
				}
				rmsNorm(cat[o:o+H], ws.emb, m.mtp.enorm, c.RMSNormEps)
				rmsNorm(cat[o+H:o+2*H], hidden[j], m.mtp.hnorm, c.RMSNormEps)
			}
			kernels.MatMul(p.h[lo*H:hi*H], m.mtp.ehProj, cat, n)
			return nil
		})
	}
	if err := input(); err != nil {
		return nil, nil, err
	}
	err = m.mtp.block.forward(ctx, r, &p)
	if err != nil && m.fellBack(err) {
		// The backend failed: the layer is redone on the CPU.
		seq.TrimMTP(base)
		p.accel = nil
		if err = input(); err == nil {
			err = m.mtp.block.forward(ctx, r, &p)
		}
	}
	if err != nil {
		seq.TrimMTP(base)
		return nil, nil, err
	}
	// The head norm goes to acc (free once the layer is done) and the rows'
	// headers are the MTP layer's own, so that the hidden states of the
	// latest Forward (in h, under hiddenRows) survive.
	n := R - first
	hn := ws.acc[:n*H]
	r.normRows(hn, p.h[first*H:], m.mtp.headNorm, n)
	lg := ws.logit[:n*c.VocabSize]
	kernels.MatMul(lg, m.lmHead, hn, n)
	return split(ws.logitRows, lg, c.VocabSize), split(ws.mtpRows, p.h, H), nil
}
