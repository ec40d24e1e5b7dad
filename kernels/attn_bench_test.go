package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Benchmarks of the small kernels attention calls once per (token, head), at
// the demo model's sizes (kv_lora 64, rope 16, head dims 32) and the real
// model's (kv_lora 512, rope 64, nope 192, v 256). They report GFLOP/s or
// GMAC/s as custom metrics; nothing is asserted.

func BenchmarkDotRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct{ n, width, stride int }{
		{70, 64, 64}, {70, 16, 16}, {2000, 512, 512}, {2000, 64, 64}, {300, 576, 576},
	} {
		rows := randVec(rng, tc.n*tc.stride)
		a := randVec(rng, tc.width)
		out := make([]float32, tc.n)
		b.Run(fmt.Sprintf("n=%d/width=%d", tc.n, tc.width), func(b *testing.B) {
			loopCPU(b, func() { DotRows(out, a, rows, tc.stride) })
			b.ReportMetric(2*float64(tc.n*tc.width)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func BenchmarkWeightedSum(b *testing.B) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, tc := range []struct{ n, width, stride int }{
		{70, 64, 64}, {2000, 512, 512}, {2000, 64, 64},
	} {
		rows := randVec(rng, tc.n*tc.stride)
		coef := randVec(rng, tc.n)
		y := make([]float32, tc.width)
		b.Run(fmt.Sprintf("n=%d/width=%d", tc.n, tc.width), func(b *testing.B) {
			loopCPU(b, func() { WeightedSum(y, coef, rows, tc.stride) })
			b.ReportMetric(2*float64(tc.n*tc.width)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkSmallMatrix covers the per-head VecMat (q times a W_uk slice) and
// MatVec (W_uv times the latent) and the batched F32 and int4 products.
func BenchmarkSmallMatrix(b *testing.B) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, tc := range []struct {
		op string
		s  shape
		n  int
	}{
		{"VecMat", shape{Int4Group, 32, 64, 64}, 1},
		{"VecMat", shape{Int4Group, 192, 512, 64}, 1},
		{"MatVec", shape{Int4Group, 32, 64, 64}, 1},
		{"MatVec", shape{Int4Group, 256, 512, 64}, 1},
		{"MatMul", shape{F32, 136, 80, 0}, 1},
		{"MatMul", shape{F32, 136, 80, 0}, 8},
		{"MatMul", shape{F32, 136, 80, 0}, 64},
		{"MatMul", shape{F32, 256, 256, 0}, 17},
		{"MatMul", shape{Int4Group, 128, 256, 64}, 17},
		{"MatMul", shape{Int8Row, 128, 256, 0}, 17},
	} {
		m := randMatrix(rng, tc.s)
		b.Run(fmt.Sprintf("%s/%s/n=%d", tc.op, tc.s, tc.n), func(b *testing.B) {
			switch tc.op {
			case "VecMat":
				x := randVec(rng, tc.s.rows)
				y := make([]float32, tc.s.cols)
				loopCPU(b, func() { VecMat(y, m, x) })
			default:
				x := randVec(rng, tc.n*tc.s.cols)
				y := make([]float32, tc.n*tc.s.rows)
				loopCPU(b, func() { MatMul(y, m, x, tc.n) })
			}
			macs := float64(tc.n * tc.s.rows * tc.s.cols)
			b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

// BenchmarkCallOverhead is the smallest DotRows: the fixed cost of a call.
func BenchmarkCallOverhead(b *testing.B) {
	out, a, rows := make([]float32, 1), make([]float32, 1), make([]float32, 1)
	loopCPU(b, func() { DotRows(out, a, rows, 1) })
}
