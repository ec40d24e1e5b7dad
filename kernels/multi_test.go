package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestMultiMatchesSingle requires the batched attention helpers to give, for
// every query, exactly what the single-query call gives, and DotRows to
// equal MatVec of the rows as an F32 matrix.
func TestMultiMatchesSingle(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, tc := range []struct{ n, keys, width, stride int }{
		{1, 1, 1, 1}, {2, 70, 64, 64}, {3, 33, 16, 20}, {8, 100, 64, 64},
		{5, 17, 200, 210}, {4, 1000, 512, 512}, {7, 9, 31, 31},
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			rows := randVec(rng, (tc.keys-1)*tc.stride+tc.width)
			q := randVec(rng, tc.n*tc.width)
			out := make([]float32, tc.n*tc.keys)
			DotRowsMulti(out, q, tc.n, rows, tc.stride)
			one := make([]float32, tc.keys)
			for b := range tc.n {
				DotRows(one, q[b*tc.width:(b+1)*tc.width], rows, tc.stride)
				requireIdentical(t, fmt.Sprintf("DotRowsMulti query %d", b), out[b*tc.keys:(b+1)*tc.keys], one)
			}
			if tc.stride == tc.width {
				m := &Matrix{Format: F32, Rows: tc.keys, Cols: tc.width, F32: rows}
				MatVec(one, m, q[:tc.width])
				requireIdentical(t, "MatVec vs DotRows", one, out[:tc.keys])
			}

			coef := randVec(rng, tc.n*tc.keys)
			y := make([]float32, tc.n*tc.width)
			WeightedSumMulti(y, coef, tc.n, rows, tc.stride)
			ws := make([]float32, tc.width)
			for b := range tc.n {
				WeightedSum(ws, coef[b*tc.keys:(b+1)*tc.keys], rows, tc.stride)
				requireIdentical(t, fmt.Sprintf("WeightedSumMulti vector %d", b), y[b*tc.width:(b+1)*tc.width], ws)
			}
		})
	}
}

// TestMultiBadArguments checks the batched helpers' panics.
func TestMultiBadArguments(t *testing.T) {
	for name, call := range map[string]func(){
		"DotRowsMulti uneven":     func() { DotRowsMulti(make([]float32, 4), make([]float32, 5), 2, make([]float32, 10), 2) },
		"WeightedSumMulti uneven": func() { WeightedSumMulti(make([]float32, 5), make([]float32, 4), 2, make([]float32, 10), 2) },
		"WeightedSumMulti short":  func() { WeightedSumMulti(make([]float32, 4), make([]float32, 8), 2, make([]float32, 7), 2) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				msg, ok := recover().(string)
				if !ok || len(msg) < 9 || msg[:9] != "kernels: " {
					t.Fatalf("recovered %v, want a kernels: message", msg)
				}
			}()
			call()
		})
	}
}

// TestThreadsVariantsMatchDefault requires the thread-bounded exported
// kernels to give, for any thread count, exactly what the default ones
// give (shapes large enough that the defaults split the work).
func TestThreadsVariantsMatchDefault(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	const n, keys, width = 8, 2000, 576
	rows := randVec(rng, keys*width)
	q := randVec(rng, n*width)
	coef := randVec(rng, n*keys)
	wantDots := make([]float32, n*keys)
	DotRowsMulti(wantDots, q, n, rows, width)
	wantSum := make([]float32, n*width)
	WeightedSumMulti(wantSum, coef, n, rows, width)
	m := randMatrix(rng, shape{Int4Group, 512, 1024, 64})
	x := randVec(rng, 4*m.Cols)
	wantMM := make([]float32, 4*m.Rows)
	MatMul(wantMM, m, x, 4)
	wantVM := make([]float32, m.Cols)
	VecMat(wantVM, m, x[:m.Rows])
	for _, threads := range []int{0, 1, 3} {
		got := make([]float32, n*keys)
		DotRowsMultiThreads(got, q, n, rows, width, threads)
		requireIdentical(t, fmt.Sprintf("DotRowsMultiThreads(%d)", threads), got, wantDots)
		got = make([]float32, n*width)
		WeightedSumMultiThreads(got, coef, n, rows, width, threads)
		requireIdentical(t, fmt.Sprintf("WeightedSumMultiThreads(%d)", threads), got, wantSum)
		got = make([]float32, 4*m.Rows)
		MatMulThreads(got, m, x, 4, threads)
		requireIdentical(t, fmt.Sprintf("MatMulThreads(%d)", threads), got, wantMM)
		got = make([]float32, m.Cols)
		VecMatThreads(got, m, x[:m.Rows], threads)
		requireIdentical(t, fmt.Sprintf("VecMatThreads(%d)", threads), got, wantVM)
	}
}
