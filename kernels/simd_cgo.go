//go:build cgo && (amd64 || arm64)

package kernels

/*
#cgo CFLAGS: -O3
#include "simd.h"
*/
import "C"

import "unsafe"

// The SIMD backend: simd.c through cgo, after haveSIMD's CPU check. Each
// function is one cgo call; isa picks the amd64 instruction set (simdISA
// for this CPU), which does not change results.

func fptr(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
func bptr(s []byte) *C.uint8_t  { return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(s))) }

// groupSize is the column count sharing one scale (Cols for per-row int4).
func groupSize(m *Matrix) int {
	if m.Format == Int4Group {
		return m.GroupSize
	}
	return m.Cols
}

// matMulRange computes rows [r0, r1) of MatMul.
func matMulRange(y []float32, m *Matrix, x []float32, n, r0, r1 int) {
	matMulRangeISA(y, m, x, n, r0, r1, simdISA())
}

// matMulRangeISA is matMulRange with an explicit instruction set.
func matMulRangeISA(y []float32, m *Matrix, x []float32, n, r0, r1, isa int) {
	if !haveSIMD() {
		goMatMulRange(y, m, x, n, r0, r1)
		return
	}
	rows, cols, ys, xs := C.long(r1-r0), C.long(m.Cols), C.long(m.Rows), C.long(m.Cols)
	yr := fptr(y[r0:])
	switch m.Format {
	case F32:
		C.spool_f32_dots(fptr(m.F32[r0*m.Cols:]), cols, rows, cols, fptr(x), xs, C.long(n), yr, ys, C.int(isa))
	case Int8Row:
		C.spool_i8_dots(bptr(m.Data[r0*m.Cols:]), fptr(m.Scales[r0:]), rows, cols, fptr(x), xs, C.long(n), yr, ys, C.int(isa))
	default:
		rb, sp := m.RowBytes(), m.ScalesPerRow()
		C.spool_i4_dots(bptr(m.Data[r0*rb:]), C.long(rb), fptr(m.Scales[r0*sp:]), C.long(sp),
			rows, cols, C.long(groupSize(m)), fptr(x), xs, C.long(n), yr, ys, C.int(isa))
	}
}

// vecMatRange computes columns [c0, c1) of VecMat (c0 a multiple of 16).
func vecMatRange(y []float32, m *Matrix, x []float32, c0, c1 int) {
	vecMatRangeISA(y, m, x, c0, c1, simdISA())
}

// vecMatRangeISA is vecMatRange with an explicit instruction set.
func vecMatRangeISA(y []float32, m *Matrix, x []float32, c0, c1, isa int) {
	if !haveSIMD() {
		goVecMatRange(y, m, x, c0, c1)
		return
	}
	rows, cols := C.long(m.Rows), C.long(m.Cols)
	switch m.Format {
	case F32:
		C.spool_f32_wsum(fptr(m.F32), cols, rows, fptr(x), 0, 1, C.long(c0), C.long(c1), fptr(y), 0, C.int(isa))
	case Int8Row:
		C.spool_i8_wsum(bptr(m.Data), fptr(m.Scales), rows, cols, fptr(x), C.long(c0), C.long(c1), fptr(y), C.int(isa))
	default:
		C.spool_i4_wsum(bptr(m.Data), C.long(m.RowBytes()), fptr(m.Scales), C.long(m.ScalesPerRow()),
			rows, cols, C.long(groupSize(m)), fptr(x), C.long(c0), C.long(c1), fptr(y), C.int(isa))
	}
}

// f32DotsRange sets out[b*ys+t] = Dot(a[b*width:], rows[t*stride:]) for
// rows t in [t0, t1) and queries b < n.
func f32DotsRange(out, a []float32, n, width int, rows []float32, stride, ys, t0, t1 int) {
	f32DotsRangeISA(out, a, n, width, rows, stride, ys, t0, t1, simdISA())
}

func f32DotsRangeISA(out, a []float32, n, width int, rows []float32, stride, ys, t0, t1, isa int) {
	if !haveSIMD() {
		goF32DotsRange(out, a, n, width, rows, stride, ys, t0, t1)
		return
	}
	C.spool_f32_dots(fptr(rows[t0*stride:]), C.long(stride), C.long(t1-t0), C.long(width),
		fptr(a), C.long(width), C.long(n), fptr(out[t0:]), C.long(ys), C.int(isa))
}

// f32WSumRange sets y[b*width+i] = sum_t coef[b*nrows+t] rows[t*stride+i]
// for i in [c0, c1) and b < n.
func f32WSumRange(y, coef []float32, n int, rows []float32, nrows, stride, width, c0, c1 int) {
	f32WSumRangeISA(y, coef, n, rows, nrows, stride, width, c0, c1, simdISA())
}

func f32WSumRangeISA(y, coef []float32, n int, rows []float32, nrows, stride, width, c0, c1, isa int) {
	if !haveSIMD() {
		goF32WSumRange(y, coef, n, rows, nrows, stride, width, c0, c1)
		return
	}
	C.spool_f32_wsum(fptr(rows), C.long(stride), C.long(nrows), fptr(coef), C.long(nrows), C.long(n),
		C.long(c0), C.long(c1), fptr(y), C.long(width), C.int(isa))
}

// readSum is the memory read probe of the benchmark.
func readSum(p []byte) uint64 {
	if !haveSIMD() || len(p) < 128 {
		return goReadSum(p)
	}
	return uint64(C.spool_read_sum(bptr(p), C.long(len(p))))
}
