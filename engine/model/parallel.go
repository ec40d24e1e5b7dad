package model

import "github.com/spoolhq/spool/kernels"

// minParallelWork is the least work (multiply-adds, roughly) worth a
// goroutine of its own: starting one costs about a microsecond.
const minParallelWork = 1 << 16

// parallelFor runs body over [0, n) on up to workers goroutines (the
// caller's included) and returns when every range has run
// (kernels.Spread). Each goroutine claims small contiguous ranges until
// none are left, so uneven jobs (rows with more keys) balance; body gets
// the index w < workers of the goroutine running it, for per-worker
// buffers. work estimates the total multiply-adds: below minParallelWork
// per goroutine fewer start, down to running inline.
// Results must not depend on which worker runs which range.
func parallelFor(workers, n, work int, body func(w, lo, hi int)) {
	if n <= 0 {
		return
	}
	workers = min(workers, n, max(work/minParallelWork, 1))
	if workers <= 1 {
		body(0, 0, n)
		return
	}
	kernels.Spread(n, max(1, n/(8*workers)), workers, body)
}
