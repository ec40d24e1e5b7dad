package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/kernels"
)

// minParallelExpertRows is the fewest (row, expert) pairs worth applying
// on several goroutines.
const minParallelExpertRows = 32

// mlpForward applies the layer's MLP (dense, or shared + routed experts) to
// the R rows of x.
func (m *Model) mlpForward(ctx context.Context, y *layer, x []float32, R int, tr *Trace) ([]float32, error) {
	if m.onBackend(R) {
		return m.mlpOnBackend(ctx, y, x, R, tr)
	}
	if !y.isSparse {
		return m.denseMLP(y.dense, x, R), nil
	}
	return m.moe(ctx, y, x, R, tr)
}

// denseMLP computes down(silu(gate x) * up x) for R rows.
func (m *Model) denseMLP(p *mlp, x []float32, R int) []float32 {
	inter := p.gate.Rows
	g := m.scratch.get(R * inter)
	u := m.scratch.get(R * inter)
	kernels.MatMul(g, p.gate, x, R)
	kernels.MatMul(u, p.up, x, R)
	for i := range g {
		g[i] = silu(g[i]) * u[i]
	}
	out := m.scratch.get(R * p.down.Rows) // the caller puts it back
	kernels.MatMul(out, p.down, g, R)
	m.scratch.put(g)
	m.scratch.put(u)
	return out
}

// route holds one row's chosen experts and their final weights.
type route struct {
	ids     []int
	weights []float32
}

// router picks each row's experts: sigmoid scores (float32), the correction
// bias added for selection only, top-k by biased score (ties to the lower
// expert id), weights = unbiased scores normalized and scaled.
func (m *Model) router(y *layer, x []float32, R int) []route {
	c := m.cfg
	E, k := c.NumRoutedExperts, c.ExpertsPerToken
	logits := make([]float32, R*E)
	kernels.MatMul(logits, y.router, x, R)
	routes := make([]route, R)
	score := make([]float32, E)
	choice := make([]float32, E)
	for i := 0; i < R; i++ {
		for e := 0; e < E; e++ {
			s := sigmoid(logits[i*E+e])
			score[e] = s
			choice[e] = s + y.bias[e]
			if nonFinite(choice[e]) {
				choice[e] = -1e30 // never chosen ahead of a finite score
			}
		}
		ids := make([]int, k)
		taken := make([]bool, E)
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
		w := make([]float32, k)
		var sum float32
		for j, e := range ids {
			w[j] = score[e]
			sum += w[j]
		}
		scale := float32(c.RoutedScalingFactor)
		for j := range w {
			if c.NormTopKProb {
				w[j] /= sum + 1e-20
			}
			w[j] *= scale
		}
		routes[i] = route{ids: ids, weights: w}
	}
	return routes
}

// moe routes every row, fetches the union of chosen experts once, applies
// each to the rows that chose it, and sums per row in ascending expert order
// (so the result is independent of the order experts arrive in), then adds
// the shared expert.
func (m *Model) moe(ctx context.Context, y *layer, x []float32, R int, tr *Trace) ([]float32, error) {
	c := m.cfg
	H, k := c.HiddenSize, c.ExpertsPerToken
	routes := m.router(y, x, R)
	if tr != nil {
		if tr.Routes == nil {
			tr.Routes = map[int][][]int{}
			tr.RouteWeights = map[int][][]float32{}
		}
		ids := make([][]int, R)
		ws := make([][]float32, R)
		for i, r := range routes {
			ids[i], ws[i] = r.ids, r.weights
		}
		tr.Routes[y.index], tr.RouteWeights[y.index] = ids, ws
	}

	// users[e] lists (row, slot) pairs that chose expert e.
	type use struct{ row, slot int }
	users := map[int][]use{}
	for i, r := range routes {
		for j, e := range r.ids {
			users[e] = append(users[e], use{i, j})
		}
	}
	union := make([]int, 0, len(users))
	for e := range users {
		union = append(union, e)
	}
	slices.Sort(union)

	lease, err := m.experts.Acquire(ctx, y.index, union)
	if err != nil {
		return nil, fmt.Errorf("model: layer %d: %w", y.index, err)
	}
	defer lease.Release()

	// Workers apply experts as the lease delivers them (the shared expert
	// first: it needs no routed weights and overlaps reads of misses). Each
	// writes only its own (row, slot) outputs, so the order they run in does
	// not matter.
	var out []float32
	expertOut := m.scratch.get(R * k * H) // [row][slot][H]; every slot is written
	defer m.scratch.put(expertOut)
	type job struct {
		idx int
		ex  *experts.Expert
	}
	apply := func(j job) {
		if j.ex == nil {
			out = m.denseMLP(y.shared, x, R)
			return
		}
		us := users[union[j.idx]]
		n := len(us)
		xs := m.scratch.get(n * H)
		for b, u := range us {
			copy(xs[b*H:(b+1)*H], x[u.row*H:(u.row+1)*H])
		}
		ys := m.denseMLP(&mlp{gate: j.ex.Gate, up: j.ex.Up, down: j.ex.Down}, xs, n)
		lease.Done(j.idx)
		for b, u := range us {
			copy(expertOut[(u.row*k+u.slot)*H:(u.row*k+u.slot+1)*H], ys[b*H:(b+1)*H])
		}
		m.scratch.put(xs)
		m.scratch.put(ys)
	}
	// A decode step's few experts are applied inline: handing them to
	// another goroutine costs more than it saves.
	jobs := make(chan job)
	var wg sync.WaitGroup
	if R*k >= minParallelExpertRows {
		for range max(1, runtime.GOMAXPROCS(0)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range jobs {
					apply(j)
				}
			}()
		}
	}
	submit := func(j job) {
		if R*k >= minParallelExpertRows {
			jobs <- j
		} else {
			apply(j)
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
		return nil, leaseErr
	}
	if out == nil {
		out = m.scratch.get(R * H)
		clear(out)
	}

	order := make([]int, k)
	acc := m.scratch.get(H)
	defer m.scratch.put(acc)
	for i, r := range routes {
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(a, b int) int { return r.ids[a] - r.ids[b] })
		row := out[i*H : (i+1)*H]
		clear(acc)
		for _, j := range order {
			kernels.Axpy(acc, r.weights[j], expertOut[(i*k+j)*H:(i*k+j+1)*H])
		}
		for d := range row {
			row[d] = acc[d] + row[d]
		}
	}
	return out, nil
}
