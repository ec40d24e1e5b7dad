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
// experts applied to all their rows. Norms, RoPE, the DSA indexer's
// scoring, the cache and the lm_head stay on the CPU. *gpu.Device
// implements it.
type Backend interface {
	// Keep makes matrices resident for the backend's lifetime.
	Keep(ms ...*kernels.Matrix) error
	// MatMulMany applies each of ws to the same n rows of x.
	MatMulMany(x []float32, n int, ws []*kernels.Matrix, ys [][]float32) error
	MLP(y []float32, l *gpu.MLP, x []float32, n int) error
	// MoE applies a MoE layer to n rows of x into y, which may be x
	// itself (x is read before y is written).
	MoE(y, x []float32, n int, l *gpu.MoE, fetch gpu.Fetch) (gpu.Routes, error)
	Attention(out []float32, a *gpu.Attention) error
}

// BackendOptions say when the backend runs.
type BackendOptions struct {
	// MinRows is the fewest rows of a forward that run on the backend
	// (default DefaultBackendRows); smaller forwards (decode steps) stay on
	// the CPU, where they are bound by reading experts, not by compute.
	MinRows int
	// OnFallback is called once when a backend operation fails: the
	// forward is redone on the CPU and the backend is not used again.
	OnFallback func(error)
}

// DefaultBackendRows is the default BackendOptions.MinRows.
const DefaultBackendRows = 16

// accelerator is a Model's backend and when to use it.
type accelerator struct {
	b    Backend
	opts BackendOptions
	// moe holds each sparse layer's MoE description (the MTP layer's at
	// index NumLayers).
	moe map[int]*gpu.MoE
}

// backendError marks a failure of the backend, which the forward recovers
// from by redoing the work on the CPU.
type backendError struct {
	a   *accelerator
	err error
}

func (e *backendError) Error() string { return "model: backend: " + e.err.Error() }
func (e *backendError) Unwrap() error { return e.err }

// SetBackend makes large forwards run their heavy steps on b, which first
// gets the resident weights it reads (attention projections, the DSA
// indexer's, dense and shared MLPs, routers, of every layer and the MTP
// layer). A nil b returns the model to the CPU. The caller keeps b open
// while the model uses it. On error the model stays on the CPU.
func (m *Model) SetBackend(b Backend, opts BackendOptions) error {
	if b == nil {
		m.accel.Store(nil)
		return nil
	}
	if opts.MinRows <= 0 {
		opts.MinRows = DefaultBackendRows
	}
	a := &accelerator{b: b, opts: opts, moe: map[int]*gpu.MoE{}}
	layers := m.layers
	if m.mtp != nil {
		layers = append(layers[:len(layers):len(layers)], m.mtp.block)
	}
	for _, y := range layers {
		ms := []*kernels.Matrix{y.qA, y.qB, y.kvA, y.kvB, y.o}
		if y.indexer != nil {
			ms = append(ms, y.indexer.wqB, y.indexer.wk, y.indexer.weights)
		}
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
	m.accel.Store(a)
	return nil
}

// Accelerated reports whether a backend is set.
func (m *Model) Accelerated() bool { return m.accel.Load() != nil }

// backendFor returns the backend a forward of n rows runs on, or nil.
func (m *Model) backendFor(n int) *accelerator {
	if a := m.accel.Load(); a != nil && n >= a.opts.MinRows {
		return a
	}
	return nil
}

// fellBack reports whether err is a backend failure; it then stops using
// that backend (reporting it once) so that the caller can redo the forward
// on the CPU.
func (m *Model) fellBack(err error) bool {
	var be *backendError
	if !errors.As(err, &be) {
		return false
	}
	if m.accel.CompareAndSwap(be.a, nil) && be.a.opts.OnFallback != nil {
		be.a.opts.OnFallback(be.err)
	}
	return true
}
