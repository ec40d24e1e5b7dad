package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Benchmarks report weight bytes streamed per second (b.SetBytes); compare
// them with bench.Kernels' memory read figure rather than with fixed numbers.
func BenchmarkMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct {
		s       shape
		n       int
		threads int
	}{
		{shape{Int4Group, 256, 128, 64}, 1, 1},
		{shape{Int4Group, 1024, 4096, 64}, 1, 1},
		{shape{Int4Group, 1024, 4096, 64}, 8, 1},
		{shape{Int4Row, 1024, 4096, 0}, 1, 1},
		{shape{Int8Row, 1024, 4096, 0}, 1, 1},
		{shape{F32, 256, 4096, 0}, 1, 1},
		{shape{Int4Group, 6144, 16384, 64}, 1, 1},
		{shape{Int4Group, 6144, 16384, 64}, 1, 2},
	} {
		m := randMatrix(rng, tc.s)
		x := randVec(rng, tc.n*tc.s.cols)
		y := make([]float32, tc.n*tc.s.rows)
		b.Run(fmt.Sprintf("%s/n=%d/threads=%d", tc.s, tc.n, tc.threads), func(b *testing.B) {
			b.SetBytes(int64(len(m.Data) + 4*len(m.Scales) + 4*len(m.F32)))
			for b.Loop() {
				matMul(y, m, x, tc.n, tc.threads)
			}
		})
	}
}

func BenchmarkVecMat(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, s := range []shape{{Int4Group, 4096, 512, 64}, {F32, 4096, 576, 0}} {
		m := randMatrix(rng, s)
		x := randVec(rng, s.rows)
		y := make([]float32, s.cols)
		b.Run(s.String(), func(b *testing.B) {
			b.SetBytes(int64(len(m.Data) + 4*len(m.Scales) + 4*len(m.F32)))
			for b.Loop() {
				vecMat(y, m, x, 1)
			}
		})
	}
}
