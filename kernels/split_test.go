package kernels

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSplitSlowWorkerLosesItsShare slows one worker of a split until every
// other range is done (ordering through channels, no clock): the other
// workers must take the slow one's share, so the slow worker runs at most
// the one chunk it had claimed, and every index is still covered once. A
// static split into equal parts gives the slow worker a whole 1/parts.
func TestSplitSlowWorkerLosesItsShare(t *testing.T) {
	for _, tc := range []struct{ total, parts, align, slow int }{
		{4096, 2, rowAlign, 1},
		{4096, 4, rowAlign, 3},
		{1000, 3, colAlign, 2},
		{7168, 8, rowAlign, 5},
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			units := (tc.total + tc.align - 1) / tc.align
			grain := max(1, units/(chunksPerWorker*tc.parts)) * tc.align
			chunks := (tc.total + grain - 1) / grain

			covered := make([]atomic.Int32, tc.total)
			var mu sync.Mutex
			ranges := make(map[int]int) // worker -> chunks run
			rows := make(map[int]int)   // worker -> indices run
			var started, done atomic.Int64
			release := make(chan struct{})
			var once sync.Once
			settle := func() {
				if started.Load()+done.Load() == int64(chunks) {
					once.Do(func() { close(release) })
				}
			}
			splitWorkers(tc.total, tc.parts, tc.align, func(w, lo, hi int) {
				if lo%tc.align != 0 {
					t.Errorf("range [%d, %d) starts off the %d alignment", lo, hi, tc.align)
				}
				if w == tc.slow {
					started.Add(1)
					settle()
					<-release
				}
				for i := lo; i < hi; i++ {
					covered[i].Add(1)
				}
				mu.Lock()
				ranges[w]++
				rows[w] += hi - lo
				mu.Unlock()
				if w != tc.slow {
					done.Add(1)
					settle()
				}
			})
			for i := range covered {
				if n := covered[i].Load(); n != 1 {
					t.Fatalf("index %d covered %d times, want once", i, n)
				}
			}
			if ranges[tc.slow] > 1 {
				t.Errorf("slow worker ran %d chunks (%d indices), want at most 1: the others did not take its share (per worker: %v)",
					ranges[tc.slow], rows[tc.slow], rows)
			}
			if static := tc.total / tc.parts; rows[tc.slow] >= static {
				t.Errorf("slow worker ran %d of %d indices, no less than a static 1/%d share", rows[tc.slow], tc.total, tc.parts)
			}
			total := 0
			for _, n := range rows {
				total += n
			}
			if total != tc.total {
				t.Errorf("workers ran %d indices, want %d", total, tc.total)
			}
		})
	}
}

// TestSlowedSplitGivesSameProduct runs a product through the balancing
// seam with one worker held back until the others have done every other
// chunk: the ranges each goroutine gets change, the bits do not.
func TestSlowedSplitGivesSameProduct(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, s := range []shape{{Int4Group, 1001, 1000, 64}, {Int8Row, 517, 700, 0}, {F32, 301, 500, 0}} {
		t.Run(s.String(), func(t *testing.T) {
			m := randMatrix(rng, s)
			const n = 3
			x := randVec(rng, n*s.cols)
			want := make([]float32, n*s.rows)
			matMulRange(want, m, x, n, 0, m.Rows)
			for parts := 2; parts <= 4; parts++ {
				units := (m.Rows + rowAlign - 1) / rowAlign
				chunks := (m.Rows + max(1, units/(chunksPerWorker*parts))*rowAlign - 1) /
					(max(1, units/(chunksPerWorker*parts)) * rowAlign)
				var others atomic.Int64
				release := make(chan struct{})
				var once sync.Once
				got := make([]float32, n*s.rows)
				splitWorkers(m.Rows, parts, rowAlign, func(w, lo, hi int) {
					if w == 1 {
						<-release
					}
					matMulRange(got, m, x, n, lo, hi)
					if w != 1 && others.Add(1) >= int64(chunks-1) {
						once.Do(func() { close(release) })
					}
				})
				once.Do(func() { close(release) })
				requireIdentical(t, fmt.Sprintf("MatMul over %d parts, worker 1 slowed", parts), got, want)
			}
		})
	}
}
