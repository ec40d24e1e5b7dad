//go:build cgo && (amd64 || arm64)

package kernels

/*
#cgo CFLAGS: -O3
#include "simd.h"
*/
import "C"

import "unsafe"

// The SIMD backend: simd.c through cgo, after haveSIMD's CPU check.

func fptr(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
func bptr(s []byte) *C.uint8_t  { return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(s))) }

// groupSize is the column count sharing one scale (Cols for per-row int4).
func groupSize(m *Matrix) int {
	if m.Format == Int4Group {
		return m.GroupSize
	}
	return m.Cols
}

// permuteInput returns the block-permuted copy of x the int4 kernels read,
// or nil when the matrix does not use one.
func permuteInput(m *Matrix, x []float32, n int) []float32 {
	if !haveSIMD() || (m.Format != Int4Row && m.Format != Int4Group) || m.Cols < 64 {
		return nil
	}
	ps := m.Cols / 64 * 64
	xp := make([]float32, n*ps)
	C.spool_i4_perm(fptr(x), C.long(m.Cols), C.long(n), C.long(m.Cols), fptr(xp), C.long(ps))
	return xp
}

// matMulRange computes rows [r0, r1) of MatMul in one cgo call.
func matMulRange(y []float32, m *Matrix, x, xp []float32, n, r0, r1 int) {
	matMulRangeISA(y, m, x, xp, n, r0, r1, int4Decoder())
}

// matMulRangeISA is matMulRange with an explicit int4 decoder.
func matMulRangeISA(y []float32, m *Matrix, x, xp []float32, n, r0, r1, isa int) {
	if !haveSIMD() {
		goMatMulRange(y, m, x, n, r0, r1)
		return
	}
	v := m.RowRange(r0, r1)
	rows, cols, ys := C.long(r1-r0), C.long(m.Cols), C.long(m.Rows)
	yr := y[r0:]
	switch m.Format {
	case F32:
		C.spool_f32_matmul(fptr(v.F32), cols, rows, cols, fptr(x), cols, C.long(n), fptr(yr), ys)
	case Int8Row:
		C.spool_i8_matmul(bptr(v.Data), fptr(v.Scales), rows, cols, fptr(x), cols, C.long(n), fptr(yr), ys)
	default:
		xpp := fptr(xp)
		if xp == nil {
			xpp = fptr(x) // no full 64-column block: never read
		}
		C.spool_i4_matmul(bptr(v.Data), C.long(m.RowBytes()), fptr(v.Scales), C.long(m.ScalesPerRow()),
			rows, cols, C.long(groupSize(m)), fptr(x), cols, xpp, C.long(m.Cols/64*64), C.long(n), fptr(yr), ys, C.int(isa))
	}
}

// vecMatScratch is the permuted accumulator the int4 VecMat needs, or nil.
func vecMatScratch(m *Matrix) []float32 {
	if !haveSIMD() || (m.Format != Int4Row && m.Format != Int4Group) {
		return nil
	}
	return make([]float32, m.Cols)
}

// vecMatRange computes columns [c0, c1) of VecMat in one cgo call.
func vecMatRange(y []float32, m *Matrix, x, yp []float32, c0, c1 int) {
	vecMatRangeISA(y, m, x, yp, c0, c1, int4Decoder())
}

// vecMatRangeISA is vecMatRange with an explicit int4 decoder.
func vecMatRangeISA(y []float32, m *Matrix, x, yp []float32, c0, c1, isa int) {
	if !haveSIMD() {
		goVecMatRange(y, m, x, c0, c1)
		return
	}
	rows, cols := C.long(m.Rows), C.long(m.Cols)
	switch m.Format {
	case F32:
		C.spool_f32_vecmat(fptr(m.F32), cols, rows, fptr(x), C.long(c0), C.long(c1), fptr(y))
	case Int8Row:
		C.spool_i8_vecmat(bptr(m.Data), fptr(m.Scales), rows, cols, fptr(x), C.long(c0), C.long(c1), fptr(y))
	default:
		C.spool_i4_vecmat(bptr(m.Data), C.long(m.RowBytes()), fptr(m.Scales), C.long(m.ScalesPerRow()),
			rows, cols, C.long(groupSize(m)), fptr(x), C.long(c0), C.long(c1), fptr(y), fptr(yp[c0:]), C.int(isa))
	}
}

// f32MatVecRange is DotRows over rows [r0, r1).
func f32MatVecRange(out []float32, m *Matrix, stride int, x []float32, r0, r1 int) {
	if !haveSIMD() {
		goF32MatVecRange(out, m, stride, x, r0, r1)
		return
	}
	C.spool_f32_matmul(fptr(m.F32[r0*stride:]), C.long(stride), C.long(r1-r0), C.long(m.Cols),
		fptr(x), C.long(m.Cols), 1, fptr(out[r0:]), C.long(r1-r0))
}

// f32VecMatRange is WeightedSum over columns [c0, c1).
func f32VecMatRange(y []float32, m *Matrix, stride int, x []float32, c0, c1 int) {
	if !haveSIMD() {
		goF32VecMatRange(y, m, stride, x, c0, c1)
		return
	}
	C.spool_f32_vecmat(fptr(m.F32), C.long(stride), C.long(m.Rows), fptr(x), C.long(c0), C.long(c1), fptr(y))
}

// readSum is the memory read probe of the benchmark.
func readSum(p []byte) uint64 {
	if !haveSIMD() || len(p) < 128 {
		return goReadSum(p)
	}
	return uint64(C.spool_read_sum(bptr(p), C.long(len(p))))
}
