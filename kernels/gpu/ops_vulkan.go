//go:build vulkan && cgo

package gpu

import (
	"fmt"
	"math"

	"github.com/spoolhq/spool/kernels"
)

// MatMul sets y[n, w.Rows] = x[n, w.Cols] w^T.
func (d *Device) MatMul(y []float32, w *kernels.Matrix, x []float32, n int) error {
	return d.MatMulMany(x, n, []*kernels.Matrix{w}, [][]float32{y})
}

// MatMulMany applies every matrix of ws (all with the same Cols) to the
// same n rows of x, uploading x once: ys[i][n, ws[i].Rows].
func (d *Device) MatMulMany(x []float32, n int, ws []*kernels.Matrix, ys [][]float32) error {
	if n <= 0 {
		return nil
	}
	if len(ws) != len(ys) || len(ws) == 0 {
		return fmt.Errorf("gpu: %d matrices for %d outputs", len(ws), len(ys))
	}
	for i, w := range ws {
		if err := checkMatMul(ys[i], w, x, n); err != nil {
			return err
		}
		if w.Cols != ws[0].Cols {
			return fmt.Errorf("gpu: matrices of %d and %d columns over the same input", ws[0].Cols, w.Cols)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.timeOp("matmul")()
	K := ws[0].Cols
	o := d.newOp()
	xr := o.input(bytesOf(x[:n*K]))
	ps := make([]*placed, len(ws))
	rs := make([]region, len(ws))
	outs := make([]transfer, len(ws))
	for i, w := range ws {
		ps[i] = o.weight(w)
		rs[i] = o.floats(n * w.Rows)
		outs[i] = o.output(rs[i], bytesOf(ys[i][:n*w.Rows]))
	}
	if err := o.begin(); err != nil {
		return err
	}
	for i, w := range ws {
		if err := o.gemm(gemm{w: ps[i], M: w.Rows, K: K, N: n, x: o.bind(xr), xLd: K, y: o.bind(rs[i]), yLd: w.Rows}); err != nil {
			return err
		}
	}
	if err := o.barrier(); err != nil {
		return err
	}
	return o.finish(outs...)
}

// MLP sets y[n, hidden] = down(silu(gate x) * up x) for n rows of x.
func (d *Device) MLP(y []float32, l *MLP, x []float32, n int) error {
	if n <= 0 {
		return nil
	}
	if err := l.check(); err != nil {
		return err
	}
	if len(x) < n*l.Gate.Cols || len(y) < n*l.Down.Rows {
		return fmt.Errorf("gpu: MLP over %d rows needs x of %d and y of %d values, have %d and %d", n, n*l.Gate.Cols, n*l.Down.Rows, len(x), len(y))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.timeOp("mlp")()
	o := d.newOp()
	xr := o.input(bytesOf(x[:n*l.Gate.Cols]))
	yr := o.floats(n * l.Down.Rows)
	out := o.output(yr, bytesOf(y[:n*l.Down.Rows]))
	run, err := o.mlp(l, n, xr)
	if err != nil {
		return err
	}
	if err := o.begin(); err != nil {
		return err
	}
	if err := run(o.bind(yr)); err != nil {
		return err
	}
	return o.finish(out)
}

// mlp lays out the scratch of an MLP over n rows of xr and returns the
// function that records it into y (after begin).
func (o *op) mlp(l *MLP, n int, xr region) (func(y binding) error, error) {
	inter, hidden := l.Gate.Rows, l.Gate.Cols
	g, u := o.weight(l.Gate), o.weight(l.Up)
	dn := o.weight(l.Down)
	gr, ur := o.floats(n*inter), o.floats(n*inter)
	return func(y binding) error {
		x := o.bind(xr)
		if err := o.gemm(gemm{w: g, M: inter, K: hidden, N: n, x: x, xLd: hidden, y: o.bind(gr), yLd: inter}); err != nil {
			return err
		}
		if err := o.gemm(gemm{w: u, M: inter, K: hidden, N: n, x: x, xLd: hidden, y: o.bind(ur), yLd: inter}); err != nil {
			return err
		}
		if err := o.barrier(); err != nil {
			return err
		}
		if err := o.siluMul(o.bind(gr), o.bind(ur), n*inter); err != nil {
			return err
		}
		if err := o.barrier(); err != nil {
			return err
		}
		if err := o.gemm(gemm{w: dn, M: hidden, K: inter, N: n, x: o.bind(gr), xLd: inter, y: y, yLd: hidden}); err != nil {
			return err
		}
		return o.barrier()
	}, nil
}

func (o *op) siluMul(g, u binding, n int) error {
	gx, gy := grid2((n + 255) / 256)
	return o.dispatch(shSiluMul, nil, []binding{g, u}, []uint32{uint32(n)}, gx, gy, 1)
}

// copy2D records dst[dOff + i*dLd + j] = src[sOff + i*sLd + j].
func (o *op) copy2D(src, dst binding, rows, cols, sOff, sLd, dOff, dLd int) error {
	gy, gz := grid2(rows)
	push := []uint32{uint32(rows), uint32(cols), uint32(sOff), uint32(sLd), uint32(dOff), uint32(dLd)}
	return o.dispatch(shCopy2D, nil, []binding{src, dst}, push, (cols+255)/256, gy, gz)
}

func f32bits(f float32) uint32 { return math.Float32bits(f) }
