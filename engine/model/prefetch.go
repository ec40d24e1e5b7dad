package model

import (
	"context"
	"slices"

	"github.com/spoolhq/spool/engine/experts"
)

// maxPrefetchRows is the most rows a forward may have to hint its next
// layer's experts (decode and MTP verification, not prefill).
const maxPrefetchRows = 4

// prefetchNext tells a Prefetcher source which experts the next sparse
// layer after y will probably route the rows to, so that their reads can
// start while y's own experts are read and applied. The guess is the next
// layer's router applied to the current residual h (after y's attention):
// the residual changes little from layer to layer, so the next router
// mostly picks the same experts from it (PILOT-style lookahead). It only
// affects timing: the next layer routes on its real input as always.
func (m *Model) prefetchNext(ctx context.Context, y *layer, h []float32, R int) {
	pf, ok := m.experts.(experts.Prefetcher)
	if !ok {
		return
	}
	i := slices.Index(m.layers, y)
	if i < 0 {
		return
	}
	var next *layer
	for _, z := range m.layers[i+1:] {
		if z.isSparse {
			next = z
			break
		}
	}
	if next == nil {
		return
	}
	H := m.cfg.HiddenSize
	x := m.scratch.get(R * H)
	defer m.scratch.put(x)
	for r := 0; r < R; r++ {
		rmsNorm(x[r*H:(r+1)*H], h[r*H:(r+1)*H], next.postNorm, m.cfg.RMSNormEps)
	}
	var ids []int
	for _, rt := range m.router(next, x, R) {
		for _, e := range rt.ids {
			if !slices.Contains(ids, e) {
				ids = append(ids, e)
			}
		}
	}
	slices.Sort(ids)
	pf.Prefetch(ctx, next.index, ids)
}
