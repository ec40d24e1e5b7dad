package model

import (
	"context"
	"slices"

	"github.com/spoolhq/spool/engine/experts"
)

// maxPrefetchRows is the most rows a forward may have to give hints
// (decode and MTP verification, not prefill: its union of experts fills
// the working bank by itself).
const maxPrefetchRows = 4

// prefetchNext gives a Prefetcher source two hints, from the residual h
// after y's attention, for R <= maxPrefetchRows rows:
//   - the order y's own experts are wanted in, when several rows share
//     them: those the most rows route to first (the routing is exact,
//     y's router on y's own MLP input), so that the shared experts are
//     read first and their larger share of the work starts first;
//   - the experts the next sparse layer will probably route to: its
//     router applied to h (the residual changes little from layer to
//     layer: PILOT-style lookahead), read ahead while y's experts are read
//     and applied.
//
// Both only affect timing: every layer routes on its real input as always.
func (r *Runner) prefetchNext(ctx context.Context, y *layer, h []float32, R int) {
	m := r.m
	pf, ok := m.experts.(experts.Prefetcher)
	if !ok || R > maxPrefetchRows {
		return
	}
	if y.isSparse && R > 1 {
		pf.Order(y.index, r.sharedFirst(y, h, R))
	}
	if !pf.Prefetching() {
		return
	}
	i := slices.Index(m.layers, y)
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
	var ids []int
	for _, e := range r.routeResidual(next, h, R) {
		if !slices.Contains(ids, e) {
			ids = append(ids, e)
		}
	}
	slices.Sort(ids)
	pf.Prefetch(ctx, next.index, ids)
}

// routeResidual routes the rows of the residual h with layer z's router,
// on z's post-attention norm of h, and returns the experts chosen, row by
// row (experts_per_tok each). It uses the runner's routing buffers, which
// the layer's own MLP fills again afterwards.
func (r *Runner) routeResidual(z *layer, h []float32, R int) []int {
	m := r.m
	H := m.cfg.HiddenSize
	x := m.scratch.get(R * H)
	defer m.scratch.put(x)
	for i := 0; i < R; i++ {
		rmsNorm(x[i*H:(i+1)*H], h[i*H:(i+1)*H], z.postNorm, m.cfg.RMSNormEps)
	}
	r.router(z, x, R, 0)
	return r.ws.routeIDs[:R*m.cfg.ExpertsPerToken]
}

// sharedFirst lists the experts y routes the rows of h to, those more rows
// chose first (ties by id).
func (r *Runner) sharedFirst(y *layer, h []float32, R int) []int {
	rows := map[int]int{}
	for _, e := range r.routeResidual(y, h, R) {
		rows[e]++
	}
	ids := make([]int, 0, len(rows))
	for e := range rows {
		ids = append(ids, e)
	}
	slices.SortFunc(ids, func(a, b int) int {
		if rows[a] != rows[b] {
			return rows[b] - rows[a]
		}
		return a - b
	})
	return ids
}
