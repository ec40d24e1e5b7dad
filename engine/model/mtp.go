package model

import (
	"context"
	"fmt"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/kernels"
)

// MTPForward runs the multi-token-prediction layer. Row j consumes the
// final-normed main-model hidden state hidden[j] of position p = pos0+j and
// the token next[j] at position p+1; its logits predict the token at p+2.
// The MTP layer attends densely over its own cache (the rows absorbed so far,
// whatever positions they had), to which the rows are appended. It returns the logits of every row (or of
// the last row only, with lastOnly) and the layer's output hidden states
// (pre shared_head.norm) of every row.
func (m *Model) MTPForward(ctx context.Context, seq *kvcache.Sequence, pos0 int, hidden [][]float32, next []int, lastOnly bool) (logits, out [][]float32, err error) {
	if m.mtp == nil {
		return nil, nil, errNoMTP
	}
	if len(hidden) != len(next) || len(next) == 0 {
		return nil, nil, fmt.Errorf("model: MTP needs one hidden state per token (%d hidden, %d tokens)", len(hidden), len(next))
	}
	c := m.cfg
	H, R := c.HiddenSize, len(next)
	base := seq.MTP().Len()
	rows := make([]row, R)
	cat := make([]float32, R*2*H)
	emb := make([]float32, H)
	for j, t := range next {
		if t < 0 || t >= c.VocabSize {
			return nil, nil, fmt.Errorf("model: token id %d is outside the vocabulary (%d)", t, c.VocabSize)
		}
		if len(hidden[j]) != H {
			return nil, nil, fmt.Errorf("model: MTP hidden state %d has %d values, want %d", j, len(hidden[j]), H)
		}
		rows[j] = row{seq: seq, pos: pos0 + j, kv: base + j, token: t}
		kernels.DequantRow(emb, m.embed, t)
		rmsNorm(cat[j*2*H:j*2*H+H], emb, m.mtp.enorm, c.RMSNormEps)
		rmsNorm(cat[j*2*H+H:(j+1)*2*H], hidden[j], m.mtp.hnorm, c.RMSNormEps)
	}
	h := make([]float32, R*H)
	kernels.MatMul(h, m.mtp.ehProj, cat, R)

	y := m.mtp.block
	x := make([]float32, R*H)
	for i := 0; i < R; i++ {
		rmsNorm(x[i*H:(i+1)*H], h[i*H:(i+1)*H], y.inputNorm, c.RMSNormEps)
	}
	attn := m.attention(y, x, rows, nil, nil)
	for i := range h {
		h[i] += attn[i]
	}
	m.scratch.put(attn)
	for i := 0; i < R; i++ {
		rmsNorm(x[i*H:(i+1)*H], h[i*H:(i+1)*H], y.postNorm, c.RMSNormEps)
	}
	ffn, err := m.moe(ctx, y, x, R, nil)
	if err != nil {
		seq.TrimMTP(base)
		return nil, nil, err
	}
	for i := range h {
		h[i] += ffn[i]
	}
	m.scratch.put(ffn)
	first := 0
	if lastOnly {
		first = R - 1
	}
	n := R - first
	hn := make([]float32, n*H)
	for i := range n {
		rmsNorm(hn[i*H:(i+1)*H], h[(first+i)*H:(first+i+1)*H], m.mtp.headNorm, c.RMSNormEps)
	}
	lg := make([]float32, n*c.VocabSize)
	kernels.MatMul(lg, m.lmHead, hn, n)
	return splitRows(lg, c.VocabSize), splitRows(h, H), nil
}
