//go:build cgo

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestInt4DecodersIdentical requires the AVX2 and AVX-512VL int4 decoders to
// give bit-identical products, so results do not depend on which one a CPU
// gets.
func TestInt4DecodersIdentical(t *testing.T) {
	if !haveSIMD() || int4Decoder() != isaAVX512 {
		t.Skip("CPU lacks AVX-512VL: only the AVX2 decoder can run here")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, s := range testShapes() {
		if s.format != Int4Row && s.format != Int4Group {
			continue
		}
		m := randMatrix(rng, s)
		for _, n := range []int{1, 3, 8, 9} {
			x := randVec(rng, n*s.cols)
			xp := permuteInput(m, x, n)
			a := make([]float32, n*s.rows)
			b := make([]float32, n*s.rows)
			matMulRangeISA(a, m, x, xp, n, 0, s.rows, isaAVX2)
			matMulRangeISA(b, m, x, xp, n, 0, s.rows, isaAVX512)
			requireIdentical(t, fmt.Sprintf("%s n=%d avx512 vs avx2", s, n), b, a)
		}
		xr := randVec(rng, s.rows)
		a := make([]float32, s.cols)
		b := make([]float32, s.cols)
		vecMatRangeISA(a, m, xr, vecMatScratch(m), 0, s.cols, isaAVX2)
		vecMatRangeISA(b, m, xr, vecMatScratch(m), 0, s.cols, isaAVX512)
		requireIdentical(t, s.String()+" VecMat avx512 vs avx2", b, a)
	}
}
