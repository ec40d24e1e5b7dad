package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/kernels/gpu"
)

// minParallelExpertRows is the fewest (row, expert) pairs worth applying
// on several goroutines.
const minParallelExpertRows = 32

// mlpForward applies the layer's MLP (dense, or shared + routed experts)
// to every row of p and adds it to the residual stream p.h.
func (r *Runner) mlpForward(ctx context.Context, y *layer, p *pass) error {
	if y.isSparse {
		if p.accel != nil {
			return r.moeOnBackend(ctx, p.accel, y, p)
		}
		return r.moe(ctx, y, p)
	}
	H := r.m.cfg.HiddenSize
	return p.steps(func(lo, hi int) error {
		n := hi - lo
		h := p.h[lo*H : hi*H]
		x, out := r.ws.x[:n*H], r.ws.ffn[:n*H]
		r.normRows(x, h, y.postNorm, n)
		p.clk.lap(stepNorm)
		if p.accel != nil {
			if err := p.accel.b.MLP(out, &gpu.MLP{Gate: y.dense.gate, Up: y.dense.up, Down: y.dense.down}, x, n); err != nil {
				return &backendError{p.accel, err}
			}
		} else {
			denseMLP(y.dense, x, n, out, r.ws.workers[0])
		}
		p.clk.lap(stepMLP)
		r.addRows(h, out, n)
		p.clk.lap(stepNorm)
		return nil
	})
}

// denseMLP writes down(silu(gate x) * up x) of the R rows of x into out,
// ExpertBlockRows rows at a time through buf's gate and up buffers.
func denseMLP(p *mlp, x []float32, R int, out []float32, buf *mlpBuffers) {
	H, inter := p.gate.Cols, p.gate.Rows
	D := p.down.Rows
	for b := 0; b < R; b += ExpertBlockRows {
		n := min(ExpertBlockRows, R-b)
		g, u := buf.g[:n*inter], buf.u[:n*inter]
		kernels.MatMul(g, p.gate, x[b*H:(b+n)*H], n)
		kernels.MatMul(u, p.up, x[b*H:(b+n)*H], n)
		for i := range g {
			g[i] = silu(g[i]) * u[i]
		}
		kernels.MatMul(out[b*D:(b+n)*D], p.down, g, n)
	}
}

// router picks the experts of the R rows of x, rows off.. of the forward,
// into the workspace's routeIDs and routeWeights: sigmoid scores
// (float32), the correction bias added for selection only, top-k by biased
// score (ties to the lower expert id), weights = unbiased scores
// normalized and scaled. R is at most a scratch's worth of rows.
func (r *Runner) router(y *layer, x []float32, R, off int) {
	c := r.m.cfg
	ws := r.ws
	E, k := c.NumRoutedExperts, c.ExpertsPerToken
	logits := ws.routerLogits[:R*E]
	kernels.MatMul(logits, y.router, x, R)
	score, choice, taken := ws.score, ws.choice, ws.taken
	scale := float32(c.RoutedScalingFactor)
	routeIDs, routeWeights := ws.routeIDs[off*k:], ws.routeWeights[off*k:]
	for i := 0; i < R; i++ {
		for e := 0; e < E; e++ {
			s := sigmoid(logits[i*E+e])
			score[e] = s
			choice[e] = s + y.bias[e]
			if nonFinite(choice[e]) {
				choice[e] = -1e30 // never chosen ahead of a finite score
			}
		}
		ids := routeIDs[i*k : (i+1)*k]
		clear(taken)
		for j := 0; j < k; j++ {
			best := -1
			for e := 0; e < E; e++ {
				if !taken[e] && (best < 0 || choice[e] > choice[best]) {
					best = e
				}
			}
			taken[best] = true
			ids[j] = best
		}
		w := routeWeights[i*k : (i+1)*k]
		var sum float32
		for j, e := range ids {
			w[j] = score[e]
			sum += w[j]
		}
		for j := range w {
			if c.NormTopKProb {
				w[j] /= sum + 1e-20
			}
			w[j] *= scale
		}
	}
}

// groupUsers lists, for every expert chosen by some row, the (row, slot)
// pairs that chose it (as row*k+slot, ascending), and returns the chosen
// experts in ascending order.
func (r *Runner) groupUsers(R int) []int {
	ws := r.ws
	E, k := r.m.cfg.NumRoutedExperts, r.m.cfg.ExpertsPerToken
	ids := ws.routeIDs[:R*k]
	start := ws.usersStart
	clear(start)
	for _, e := range ids {
		start[e+1]++
	}
	for e := 0; e < E; e++ {
		start[e+1] += start[e]
	}
	next := ws.usersNext
	copy(next, start[:E])
	for us, e := range ids {
		ws.users[next[e]] = int32(us)
		next[e]++
	}
	union := ws.union[:0]
	for e := 0; e < E; e++ {
		if start[e+1] > start[e] {
			union = append(union, e)
		}
	}
	return union
}

// route routes every row of p, a step's worth at a time on each row's
// post-attention norm, records the routes in the trace, and returns the
// union of the chosen experts (ascending) with, for each, the rows that
// chose it (groupUsers). It counts the union as touched.
func (r *Runner) route(y *layer, p *pass) []int {
	m := r.m
	c := m.cfg
	ws := r.ws
	H, k, R := c.HiddenSize, c.ExpertsPerToken, len(p.rows)
	p.steps(func(lo, hi int) error {
		n := hi - lo
		x := ws.x[:n*H]
		r.normRows(x, p.h[lo*H:hi*H], y.postNorm, n)
		r.router(y, x, n, lo)
		return nil
	})
	if tr := p.tr; tr != nil {
		if tr.Routes == nil {
			tr.Routes = map[int][][]int{}
			tr.RouteWeights = map[int][][]float32{}
		}
		ids := make([][]int, R)
		wts := make([][]float32, R)
		for i := range R {
			ids[i] = slices.Clone(ws.routeIDs[i*k : (i+1)*k])
			wts[i] = slices.Clone(ws.routeWeights[i*k : (i+1)*k])
		}
		tr.Routes[y.index], tr.RouteWeights[y.index] = ids, wts
	}
	union := r.groupUsers(R)
	if row := m.expertRow[y.index]; row >= 0 {
		for _, e := range union {
			r.touched.add(row, e, c.NumRoutedExperts)
		}
	}
	return union
}

// moe routes every row of p, acquires the union of the chosen experts
// once, applies each to the rows that chose it and adds, per row, the sum
// of its experts' weighted outputs in ascending expert order (so the
// result is independent of the order experts arrive in) and then the
// shared expert to the residual stream. A forward of at most ArrivalRows
// rows applies the experts as they arrive (moeArrival); a larger one in
// ascending order (moeAscending). Both make the same additions in the same
// order.
func (r *Runner) moe(ctx context.Context, y *layer, p *pass) error {
	m := r.m
	R := len(p.rows)
	union := r.route(y, p)
	p.clk.lap(stepMLP)
	lease, err := m.experts.Acquire(ctx, y.index, union)
	if err != nil {
		return fmt.Errorf("model: layer %d: %w", y.index, err)
	}
	defer func() {
		lease.Release()
		r.record(lease)
	}()
	if R <= min(r.arrival, p.scratch) {
		return r.moeArrival(ctx, y, p, union, lease)
	}
	return r.moeAscending(ctx, y, p, union, lease)
}

// moeArrival is moe for a forward of one step's rows, whose normed input
// the workspace's x still holds from routing: workers apply experts as
// the lease delivers them (the shared expert first: it needs no routed
// weights and overlaps reads of misses), each writing only its own
// (row, slot) outputs, which are summed per row in ascending expert order
// once all are in.
func (r *Runner) moeArrival(ctx context.Context, y *layer, p *pass, union []int, lease experts.Lease) error {
	c := r.m.cfg
	ws := r.ws
	H, k, R := c.HiddenSize, c.ExpertsPerToken, len(p.rows)
	x, out := ws.x[:R*H], ws.acc[:R*H]
	expertOut := ws.expertOut[:R*k*H] // [row][slot][H]; every slot is written
	type job struct {
		idx int
		ex  *experts.Expert
	}
	apply := func(j job, buf *mlpBuffers) {
		if j.ex == nil {
			denseMLP(y.shared, x, R, out, buf)
			return
		}
		e := union[j.idx]
		us := ws.users[ws.usersStart[e]:ws.usersStart[e+1]]
		ex := &mlp{gate: j.ex.Gate, up: j.ex.Up, down: j.ex.Down}
		for b := 0; b < len(us); b += ExpertBlockRows {
			block := us[b:min(b+ExpertBlockRows, len(us))]
			n := len(block)
			xs, ys := buf.xs[:n*H], buf.ys[:n*H]
			for i, u := range block {
				row := int(u) / k
				copy(xs[i*H:(i+1)*H], x[row*H:(row+1)*H])
			}
			denseMLP(ex, xs, n, ys, buf)
			for i, u := range block {
				copy(expertOut[int(u)*H:(int(u)+1)*H], ys[i*H:(i+1)*H])
			}
		}
		lease.Done(j.idx)
	}
	// A decode step's few experts are applied inline: handing them to
	// another goroutine costs more than it saves.
	parallel := R*k >= minParallelExpertRows
	jobs := make(chan job)
	var wg sync.WaitGroup
	if parallel {
		for _, buf := range ws.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range jobs {
					apply(j, buf)
				}
			}()
		}
	}
	submit := func(j job) {
		if parallel {
			jobs <- j
		} else {
			apply(j, ws.workers[0])
		}
	}
	if y.shared != nil {
		submit(job{idx: -1})
	}
	var leaseErr error
	for {
		idx, ex, err := lease.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			leaseErr = fmt.Errorf("model: layer %d: %w", y.index, err)
			break
		}
		submit(job{idx: idx, ex: ex})
	}
	close(jobs)
	wg.Wait()
	if leaseErr != nil {
		return leaseErr
	}
	if y.shared == nil {
		clear(out)
	}
	order, sum := ws.order, ws.sum
	for i := 0; i < R; i++ {
		ids := ws.routeIDs[i*k : (i+1)*k]
		wts := ws.routeWeights[i*k : (i+1)*k]
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(a, b int) int { return ids[a] - ids[b] })
		row := out[i*H : (i+1)*H]
		clear(sum)
		for _, j := range order {
			kernels.Axpy(sum, wts[j], expertOut[(i*k+j)*H:(i*k+j+1)*H])
		}
		for d := range row {
			row[d] = sum[d] + row[d]
		}
	}
	r.addRows(p.h, out, R)
	return nil
}

// moeAscending is moe for a forward of any size: the experts are applied
// in ascending id order (those the lease delivers ahead of their turn wait
// for it; a streamed source reads its misses in that order, so the next
// ones read while one computes), each to all the rows that chose it in
// blocks spread over the workers, adding its weighted outputs to each
// row's running sum (ws.acc). Each row's sum thus takes its experts in
// ascending order, as moeArrival's does. The rows' normed inputs are
// computed again from the residual stream for each block (a norm is
// nothing beside an expert's product), so that a row keeps only its
// residual and its sum from the router to the end of the layer. Then, a
// step at a time, the shared expert's output is added to the sum and the
// sum to the residual stream.
func (r *Runner) moeAscending(ctx context.Context, y *layer, p *pass, union []int, lease experts.Lease) error {
	c := r.m.cfg
	ws := r.ws
	H, k, R := c.HiddenSize, c.ExpertsPerToken, len(p.rows)
	acc := ws.acc[:R*H]
	clear(acc)
	got := ws.got[:len(union)]
	clear(got)
	defer clear(got)
	inter := max(1, c.MoEIntermediateSize)
	for next := range union {
		for got[next] == nil {
			idx, ex, err := lease.Next(ctx)
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = fmt.Errorf("expert %d was never delivered", union[next])
				}
				return fmt.Errorf("model: layer %d: %w", y.index, err)
			}
			got[idx] = ex
		}
		e := union[next]
		us := ws.users[ws.usersStart[e]:ws.usersStart[e+1]]
		ex := &mlp{gate: got[next].Gate, up: got[next].Up, down: got[next].Down}
		blocks := (len(us) + ExpertBlockRows - 1) / ExpertBlockRows
		parallelFor(len(ws.workers), blocks, len(us)*3*H*inter, func(w, lo, hi int) {
			buf := ws.workers[w]
			for b := lo; b < hi; b++ {
				block := us[b*ExpertBlockRows : min((b+1)*ExpertBlockRows, len(us))]
				n := len(block)
				xs, ys := buf.xs[:n*H], buf.ys[:n*H]
				for i, u := range block {
					row := int(u) / k
					rmsNorm(xs[i*H:(i+1)*H], p.h[row*H:(row+1)*H], y.postNorm, c.RMSNormEps)
				}
				denseMLP(ex, xs, n, ys, buf)
				for i, u := range block {
					row := int(u) / k
					kernels.Axpy(acc[row*H:(row+1)*H], ws.routeWeights[u], ys[i*H:(i+1)*H])
				}
			}
		})
		got[next] = nil
		lease.Done(next)
	}
	return p.steps(func(lo, hi int) error {
		n := hi - lo
		out := ws.ffn[:n*H]
		if y.shared != nil {
			x := ws.x[:n*H]
			r.normRows(x, p.h[lo*H:hi*H], y.postNorm, n)
			denseMLP(y.shared, x, n, out, ws.workers[0])
		} else {
			clear(out)
		}
		sum := acc[lo*H : hi*H]
		for d := range out {
			out[d] = sum[d] + out[d]
		}
		r.addRows(p.h[lo*H:hi*H], out, n)
		return nil
	})
}
