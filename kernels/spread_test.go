package kernels_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/spoolhq/spool/kernels"
)

// TestSpreadCoversEachIndexOnce: every index of [0, total) is run exactly
// once, in ranges of grain (the last shorter), by workers numbered below
// workers; and no range runs after Spread has returned, though helpers
// the scheduler starts late are not waited for.
func TestSpreadCoversEachIndexOnce(t *testing.T) {
	for _, tc := range []struct{ total, grain, workers int }{
		{0, 4, 4},
		{1, 4, 4},
		{10, 3, 1},
		{10, 3, 16},
		{1000, 7, 4},
		{4096, 64, 16},
		{100, 0, 3}, // a zero grain is one index a range
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			covered := make([]atomic.Int32, tc.total)
			var returned atomic.Bool
			var late atomic.Int32
			for range 50 { // repeated: helpers start at different times
				for i := range covered {
					covered[i].Store(0)
				}
				returned.Store(false)
				kernels.Spread(tc.total, tc.grain, tc.workers, func(w, lo, hi int) {
					if returned.Load() {
						late.Add(1)
					}
					if w < 0 || w >= max(tc.workers, 1) {
						t.Errorf("worker %d outside [0, %d)", w, tc.workers)
					}
					g := max(tc.grain, 1)
					if tc.workers > 1 && (lo%g != 0 || (hi-lo != g && hi != tc.total)) {
						t.Errorf("range [%d, %d) is not a grain-%d range of [0, %d)", lo, hi, g, tc.total)
					}
					for i := lo; i < hi; i++ {
						covered[i].Add(1)
					}
				})
				returned.Store(true)
				for i := range covered {
					if n := covered[i].Load(); n != 1 {
						t.Fatalf("index %d run %d times", i, n)
					}
				}
			}
			if n := late.Load(); n > 0 {
				t.Errorf("%d ranges ran after Spread returned", n)
			}
		})
	}
}

// TestSpreadWaitsForAClaimedRange: a helper that has claimed a range holds
// Spread until that range is done, however long it takes (ordering through
// channels, no clock).
func TestSpreadWaitsForAClaimedRange(t *testing.T) {
	inRange := make(chan struct{})
	release := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		kernels.Spread(2, 1, 2, func(w, lo, hi int) {
			if lo == 0 {
				// The first range waits until the second has been
				// claimed and is running, whoever runs it.
				<-inRange
				return
			}
			close(inRange)
			<-release
		})
	}()
	<-inRange
	select {
	case <-finished:
		t.Fatal("Spread returned while a claimed range was still running")
	default:
	}
	close(release)
	<-finished
}
