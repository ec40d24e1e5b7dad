package model

import (
	"errors"
	"fmt"

	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/kernels/gpu"
)

// Backend runs the heavy steps of large forwards (prefill chunks) on an
// accelerator: the projections, the attention of a chunk over the
// compressed cache, the dense and shared MLPs, the router and the routed
// experts applied to all their rows. Norms, RoPE, the DSA indexer, the
// cache and the lm_head stay on the CPU. *gpu.Device implements it.
type Backend interface {
	// Keep makes matrices resident for the backend's lifetime.
	Keep(ms ...*kernels.Matrix) error
	// MatMulMany applies each of ws to the same n rows of x.
	MatMulMany(x []float32, n int, ws []*kernels.Matrix, ys [][]float32) error
	MLP(y []float32, l *gpu.MLP, x []float32, n int) error
	MoE(y, x []float32, n int, l *gpu.MoE, fetch gpu.Fetch) (gpu.Routes, error)
	Attention(out []float32, a *gpu.Attention) error
}

// BackendOptions say when the backend runs.
type BackendOptions struct {
	// MinRows is the fewest rows of a forward that run on the backend
	// (default DefaultBackendRows); smaller forwards (decode steps) stay on
	// the CPU, where they are bound by reading experts, not by compute.
	MinRows int
	// OnFallback is called when a backend operation fails: the forward is
	// redone on the CPU and the backend is not used again.
	OnFallback func(error)
}

// DefaultBackendRows is the default BackendOptions.MinRows.
const DefaultBackendRows = 16

// accelerator is a Model's backend and when to use it.
type accelerator struct {
	b    Backend
	opts BackendOptions
	// layers holds each decoder layer's MoE description (nil for dense).
	moe map[int]*gpu.MoE
}

// backendError marks a failure of the backend, which the forward recovers
// from by redoing the work on the CPU.
type backendError struct{ err error }

func (e *backendError) Error() string { return "model: backend: " + e.err.Error() }
func (e *backendError) Unwrap() error { return e.err }

// SetBackend makes large forwards run their heavy steps on b, which first
// gets the resident weights it reads (attention projections, dense and
// shared MLPs, routers). A nil b returns the model to the CPU. The caller
// keeps b open while the model uses it. On error the model stays on the
// CPU.
func (m *Model) SetBackend(b Backend, opts BackendOptions) error {
	if b == nil {
		m.accel = nil
		return nil
	}
	if opts.MinRows <= 0 {
		opts.MinRows = DefaultBackendRows
	}
	a := &accelerator{b: b, opts: opts, moe: map[int]*gpu.MoE{}}
	for _, y := range m.layers {
		ms := []*kernels.Matrix{y.qA, y.qB, y.kvA, y.kvB, y.o}
		if y.dense != nil {
			ms = append(ms, y.dense.gate, y.dense.up, y.dense.down)
		}
		if y.isSparse {
			ms = append(ms, y.router)
			l := &gpu.MoE{Router: y.router, Bias: y.bias, TopK: m.cfg.ExpertsPerToken,
				Normalize: m.cfg.NormTopKProb, Scale: float32(m.cfg.RoutedScalingFactor)}
			if y.shared != nil {
				ms = append(ms, y.shared.gate, y.shared.up, y.shared.down)
				l.Shared = &gpu.MLP{Gate: y.shared.gate, Up: y.shared.up, Down: y.shared.down}
			}
			a.moe[y.index] = l
		}
		if err := b.Keep(ms...); err != nil {
			return fmt.Errorf("model: layer %d weights on the backend: %w", y.index, err)
		}
	}
	m.accel = a
	return nil
}

// Accelerated reports whether a backend is set.
func (m *Model) Accelerated() bool { return m.accel != nil }

// onBackend reports whether a forward of n rows runs on the backend.
func (m *Model) onBackend(n int) bool { return m.accel != nil && n >= m.accel.opts.MinRows }

// forwardOrFallback runs forwardRows and, when the backend failed, drops
// the backend, restores the sequences and runs the forward on the CPU.
func (m *Model) forwardOrFallback(forward func() ([]Output, error), reqs []Request) ([]Output, error) {
	out, err := forward()
	var be *backendError
	if !errors.As(err, &be) {
		return out, err
	}
	a := m.accel
	m.accel = nil
	if a.opts.OnFallback != nil {
		a.opts.OnFallback(be.err)
	}
	for _, r := range reqs {
		start := r.Seq.Len() - len(r.Tokens)
		r.Seq.Trim(start)
		if err := r.Seq.Reserve(r.Tokens); err != nil {
			return nil, err
		}
	}
	return forward()
}
