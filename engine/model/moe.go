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
)

// minParallelExpertRows is the fewest (row, expert) pairs worth applying
// on several goroutines.
const minParallelExpertRows = 32

// mlpForward applies the layer's MLP (dense, or shared + routed experts) to
// the normed rows p.x and returns its output (the workspace's ffn rows).
func (r *Runner) mlpForward(ctx context.Context, y *layer, p *pass) ([]float32, error) {
	R := len(p.rows)
	out := r.ws.ffn[:R*r.m.cfg.HiddenSize]
	if p.accel != nil {
		return out, r.mlpOnBackend(ctx, p.accel, y, p, out)
	}
	if !y.isSparse {
		denseMLP(y.dense, p.x, R, out, r.ws.workers[0])
		return out, nil
	}
	return out, r.moe(ctx, y, p, out)
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

// router picks each row's experts into the workspace's routeIDs and
// routeWeights: sigmoid scores (float32), the correction bias added for
// selection only, top-k by biased score (ties to the lower expert id),
// weights = unbiased scores normalized and scaled.
func (r *Runner) router(y *layer, x []float32, R int) {
	c := r.m.cfg
	ws := r.ws
	E, k := c.NumRoutedExperts, c.ExpertsPerToken
	logits := ws.routerLogits[:R*E]
	kernels.MatMul(logits, y.router, x, R)
	score, choice, taken := ws.score, ws.choice, ws.taken
	scale := float32(c.RoutedScalingFactor)
	for i := 0; i < R; i++ {
		for e := 0; e < E; e++ {
			s := sigmoid(logits[i*E+e])
			score[e] = s
			choice[e] = s + y.bias[e]
			if nonFinite(choice[e]) {
				choice[e] = -1e30 // never chosen ahead of a finite score
			}
		}
		ids := ws.routeIDs[i*k : (i+1)*k]
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
		w := ws.routeWeights[i*k : (i+1)*k]
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

// moe routes every row of p.x, fetches the union of chosen experts once,
// applies each to the rows that chose it, and sums per row in ascending
// expert order (so the result is independent of the order experts arrive
// in), then adds the shared expert. It writes out.
func (r *Runner) moe(ctx context.Context, y *layer, p *pass, out []float32) error {
	x, R, tr := p.x, len(p.rows), p.tr
	m := r.m
	c := m.cfg
	ws := r.ws
	H, k := c.HiddenSize, c.ExpertsPerToken
	r.router(y, x, R)
	if tr != nil {
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

	lease, err := m.experts.Acquire(ctx, y.index, union)
	if err != nil {
		return fmt.Errorf("model: layer %d: %w", y.index, err)
	}
	defer func() {
		lease.Release()
		r.record(lease)
	}()

	// Workers apply experts as the lease delivers them (the shared expert
	// first: it needs no routed weights and overlaps reads of misses). Each
	// writes only its own (row, slot) outputs, so the order they run in does
	// not matter.
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
		clear(out[:R*H])
	}

	order, acc := ws.order, ws.acc
	for i := 0; i < R; i++ {
		ids := ws.routeIDs[i*k : (i+1)*k]
		wts := ws.routeWeights[i*k : (i+1)*k]
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(a, b int) int { return ids[a] - ids[b] })
		row := out[i*H : (i+1)*H]
		clear(acc)
		for _, j := range order {
			kernels.Axpy(acc, wts[j], expertOut[(i*k+j)*H:(i*k+j+1)*H])
		}
		for d := range row {
			row[d] = acc[d] + row[d]
		}
	}
	return nil
}
