package kernels

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// Benchmarks report weight bytes streamed per second (b.SetBytes); compare
// them with BenchKernels' memory read figure rather than with fixed numbers.
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

// TestBenchKernelsReports runs the benchmark on a small working set for a
// moment and checks that every figure was filled in.
func TestBenchKernelsReports(t *testing.T) {
	res, err := BenchKernels(context.Background(), BenchOptions{Seconds: 0.001, WorkingSet: 64 << 20, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]float64{
		"read": res.MemoryReadBytesPerS, "copy": res.MemoryCopyBytesPerS,
		"int4-g64": res.Int4G64MatVecBytesPerS, "int4-row": res.Int4RowMatVecBytesPerS,
		"int8-row": res.Int8RowMatVecBytesPerS, "matmul8": res.Int4G64MatMul8BytesPerS,
		"ratio": res.Ratio,
	} {
		if !(v > 0) {
			t.Errorf("%s = %g, want a positive figure", name, v)
		}
	}
	if processCPUTime() > 0 && !(res.CPURatio > 0 && res.MemoryReadCPUBytesPerS > 0 && res.Int4G64MatVecCPUBytesPerS > 0) {
		t.Errorf("CPU-time figures missing: %+v", res)
	}
	if res.Threads != 2 || res.CPUFeatures == "" || res.WorkingSetBytes < 64<<20 {
		t.Errorf("result header %+v", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := BenchKernels(ctx, BenchOptions{Seconds: 0.001, WorkingSet: 64 << 20}); err == nil {
		t.Error("cancelled benchmark returned no error")
	}
}
