//go:build vulkan && cgo

package gpu

/*
#include "vk.h"
*/
import "C"

import (
	"fmt"
	"slices"
	"time"

	"github.com/spoolhq/spool/kernels"
)

// BenchMatMul times products of the kept matrix w over n rows of x: the
// median of reps MatMul calls after a warm-up, and reps products in one
// submission.
func (d *Device) BenchMatMul(w *kernels.Matrix, x []float32, n, reps int) (MatMulTiming, error) {
	if err := checkMatMul(make([]float32, n*w.Rows), w, x, n); err != nil {
		return MatMulTiming{}, err
	}
	y := make([]float32, n*w.Rows)
	if err := d.MatMul(y, w, x, n); err != nil { // warm-up: pipeline, buffers
		return MatMulTiming{}, err
	}
	times := make([]float64, reps)
	for i := range times {
		start := time.Now()
		if err := d.MatMul(y, w, x, n); err != nil {
			return MatMulTiming{}, err
		}
		times[i] = time.Since(start).Seconds()
	}
	slices.Sort(times)
	res := MatMulTiming{WithTransfers: times[len(times)/2]}

	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.newOp()
	xr := o.input(bytesOf(x[:n*w.Cols]))
	p := o.weight(w)
	yr := o.floats(n * w.Rows)
	if err := o.begin(); err != nil {
		return res, err
	}
	if err := o.submit(); err != nil {
		return res, err
	}
	g := gemm{w: p, M: w.Rows, K: w.Cols, N: n, x: o.bind(xr), xLd: w.Cols, y: o.bind(yr), yLd: w.Rows}
	for range 2 { // the first round warms up
		start := time.Now()
		for range reps {
			if err := o.gemm(g); err != nil {
				return res, err
			}
			if err := o.barrier(); err != nil {
				return res, err
			}
		}
		if err := o.submit(); err != nil {
			return res, err
		}
		res.Kernel = time.Since(start).Seconds() / float64(reps)
	}
	return res, nil
}

// BenchUpload times copying n host bytes into device memory through the
// staging ring (the path of expert slabs and resident weights), in bytes
// per second: the median of reps copies.
func (d *Device) BenchUpload(src []byte, reps int) (float64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	buf, err := d.newBuffer(int64(len(src)), C.SPOOL_MEM_DEVICE)
	if err != nil {
		return 0, fmt.Errorf("gpu: upload benchmark: %w", err)
	}
	defer d.freeBuffer(buf)
	times := make([]float64, reps)
	for i := range times {
		start := time.Now()
		if err := d.upload(buf, 0, src); err != nil {
			return 0, err
		}
		if err := d.flush(); err != nil {
			return 0, err
		}
		times[i] = time.Since(start).Seconds()
	}
	slices.Sort(times)
	return float64(len(src)) / times[len(times)/2], nil
}
