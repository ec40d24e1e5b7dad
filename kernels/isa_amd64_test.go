//go:build cgo

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestISAVariantsIdentical requires the AVX2 and AVX-512 kernels to give
// bit-identical results for every format and operation, so results do not
// depend on which one a CPU gets.
func TestISAVariantsIdentical(t *testing.T) {
	if !haveAVX512() {
		t.Skip("CPU lacks AVX-512 F/VL/BW/DQ/VBMI: only the AVX2 kernels can run here")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, s := range testShapes() {
		m := randMatrix(rng, s)
		for _, n := range []int{1, 2, 3, 4, 5, 8, 9} {
			x := randVec(rng, n*s.cols)
			a := make([]float32, n*s.rows)
			b := make([]float32, n*s.rows)
			matMulRangeISA(a, m, x, n, 0, s.rows, isaAVX2)
			matMulRangeISA(b, m, x, n, 0, s.rows, isaAVX512)
			requireIdentical(t, fmt.Sprintf("%s n=%d avx512 vs avx2", s, n), b, a)
		}
		xr := randVec(rng, s.rows)
		a := make([]float32, s.cols)
		b := make([]float32, s.cols)
		vecMatRangeISA(a, m, xr, 0, s.cols, isaAVX2)
		vecMatRangeISA(b, m, xr, 0, s.cols, isaAVX512)
		requireIdentical(t, s.String()+" VecMat avx512 vs avx2", b, a)
	}
	for _, tc := range []struct{ n, keys, width, stride int }{
		{1, 70, 64, 64}, {3, 33, 16, 20}, {8, 100, 64, 64}, {5, 17, 200, 210},
	} {
		rows := randVec(rng, (tc.keys-1)*tc.stride+tc.width)
		q := randVec(rng, tc.n*tc.width)
		a := make([]float32, tc.n*tc.keys)
		b := make([]float32, tc.n*tc.keys)
		f32DotsRangeISA(a, q, tc.n, tc.width, rows, tc.stride, tc.keys, 0, tc.keys, isaAVX2)
		f32DotsRangeISA(b, q, tc.n, tc.width, rows, tc.stride, tc.keys, 0, tc.keys, isaAVX512)
		requireIdentical(t, fmt.Sprintf("dots %+v avx512 vs avx2", tc), b, a)
		coef := randVec(rng, tc.keys)
		ya := make([]float32, tc.width)
		yb := make([]float32, tc.width)
		f32WSumRangeISA(ya, coef, 1, rows, tc.keys, tc.stride, tc.width, 0, tc.width, isaAVX2)
		f32WSumRangeISA(yb, coef, 1, rows, tc.keys, tc.stride, tc.width, 0, tc.width, isaAVX512)
		requireIdentical(t, fmt.Sprintf("weighted sum %+v avx512 vs avx2", tc), yb, ya)
	}
}
