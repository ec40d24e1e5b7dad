package kernels

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Work below these sizes stays on the calling goroutine: starting goroutines
// costs microseconds, which is the whole budget of a small matrix (the demo
// model's 256x128 projections take well under a microsecond).
const (
	// minParallelBytes is the weight bytes (scaled by the batch, see
	// matMulWork) a thread must have to be worth starting.
	minParallelBytes = 128 << 10
	// rowAlign keeps thread row ranges on multiples of the SIMD row tiles.
	rowAlign = 16
	// colAlign keeps column ranges on multiples of the 16-column chunks.
	colAlign = 64
)

// MatVec sets y[r] = sum_i W[r,i] x[i] for every row r of m. y needs m.Rows
// values and x m.Cols. It is MatMul with n = 1, so its result is
// bit-identical to the matching row of any MatMul.
//
// Like the copy builtin, it panics if the matrix is malformed or a slice is
// too short: these are programming errors, not input errors.
func MatVec(y []float32, m *Matrix, x []float32) {
	MatMul(y, m, x, 1)
}

// MatMul sets Y[n, Rows] = X[n, Cols] W^T: for each b < n, y[b*Rows:][:Rows]
// is m applied to x[b*Cols:][:Cols]. Each decoded weight chunk is reused for
// up to 4 inputs, and large matrices are split by rows across
// runtime.GOMAXPROCS threads. Row b of the result is bit-identical to MatVec
// of row b of x, whatever n and the thread count.
func MatMul(y []float32, m *Matrix, x []float32, n int) {
	matMul(y, m, x, n, runtime.GOMAXPROCS(0))
}

// MatMulThreads is MatMul on at most threads goroutines (the caller's
// included): callers that already spread their work over the cores, such
// as attention's workers, pass 1. The result does not depend on threads.
func MatMulThreads(y []float32, m *Matrix, x []float32, n, threads int) {
	matMul(y, m, x, n, max(threads, 1))
}

// VecMat sets y[i] = sum_r x[r] W[r,i]: x has m.Rows values and y m.Cols
// (the transposed product, e.g. a query times a weight slice in absorbed
// attention). Each y[i] sums the even rows and the odd rows in order, then
// adds the two, so the result does not depend on the thread count.
func VecMat(y []float32, m *Matrix, x []float32) {
	vecMat(y, m, x, runtime.GOMAXPROCS(0))
}

// VecMatThreads is VecMat on at most threads goroutines; the result does
// not depend on threads.
func VecMatThreads(y []float32, m *Matrix, x []float32, threads int) {
	vecMat(y, m, x, max(threads, 1))
}

// DotRows sets out[t] = Dot(a, rows[t*stride:][:len(a)]) for t < len(out):
// a query against len(out) cached keys stored stride values apart. It is
// computed by the f32 matrix kernel (the result is bit-identical to MatVec
// of the rows as an F32 matrix, and may differ from Dot in the last bits).
func DotRows(out, a, rows []float32, stride int) {
	DotRowsMulti(out, a, 1, rows, stride)
}

// DotRowsMulti is DotRows for n queries at once, e.g. all heads of a token
// against a shared latent cache: with width = len(a)/n and keys =
// len(out)/n, out[b*keys+t] = Dot(a[b*width:][:width], rows[t*stride:]).
// Each key row is loaded once for up to 4 queries. Row b of out is
// bit-identical to DotRows(out[b*keys:][:keys], a[b*width:][:width], rows,
// stride).
func DotRowsMulti(out, a []float32, n int, rows []float32, stride int) {
	DotRowsMultiThreads(out, a, n, rows, stride, runtime.GOMAXPROCS(0))
}

// DotRowsMultiThreads is DotRowsMulti on at most threads goroutines; the
// result does not depend on threads.
func DotRowsMultiThreads(out, a []float32, n int, rows []float32, stride, threads int) {
	if len(out) == 0 || n <= 0 {
		return
	}
	if len(a)%n != 0 || len(out)%n != 0 {
		panic(fmt.Sprintf("kernels: DotRowsMulti of %d queries needs multiples of %d values, have %d queries and %d outputs",
			n, n, len(a), len(out)))
	}
	width, keys := len(a)/n, len(out)/n
	checkStrided("DotRows", keys, width, len(rows), stride)
	if parallelism(max(threads, 1), 4*keys*width*(n+1)/2, keys, rowAlign) <= 1 {
		f32DotsRange(out, a, n, width, rows, stride, keys, 0, keys)
		return
	}
	dotRows(out, a, n, width, rows, stride, keys, threads)
}

// WeightedSum sets y[i] = sum_t coef[t] rows[t*stride+i] for i < len(y),
// summing the even t and the odd t in order, then adding the two: attention
// probabilities times cached values stored stride values apart.
func WeightedSum(y, coef, rows []float32, stride int) {
	WeightedSumMulti(y, coef, 1, rows, stride)
}

// WeightedSumMulti is WeightedSum for n coefficient vectors over the same
// rows in one call, e.g. every head's probabilities times a shared latent
// cache: with width = len(y)/n and keys = len(coef)/n, y[b*width:][:width]
// is bit for bit WeightedSum(y[b*width:][:width], coef[b*keys:][:keys],
// rows, stride).
func WeightedSumMulti(y, coef []float32, n int, rows []float32, stride int) {
	WeightedSumMultiThreads(y, coef, n, rows, stride, runtime.GOMAXPROCS(0))
}

// WeightedSumMultiThreads is WeightedSumMulti on at most threads
// goroutines; the result does not depend on threads.
func WeightedSumMultiThreads(y, coef []float32, n int, rows []float32, stride, threads int) {
	if len(y) == 0 || n <= 0 {
		return
	}
	if len(y)%n != 0 || len(coef)%n != 0 {
		panic(fmt.Sprintf("kernels: WeightedSumMulti of %d vectors needs multiples of %d values, have %d outputs and %d coefficients",
			n, n, len(y), len(coef)))
	}
	if len(coef) == 0 {
		clear(y)
		return
	}
	width, keys := len(y)/n, len(coef)/n
	checkStrided("WeightedSum", keys, width, len(rows), stride)
	if parallelism(max(threads, 1), 4*keys*width*n, width, colAlign) <= 1 {
		f32WSumRange(y, coef, n, rows, keys, stride, width, 0, width)
		return
	}
	weightedSum(y, coef, n, rows, keys, stride, width, threads)
}

func checkStrided(name string, n, width, have, stride int) {
	if stride < width {
		panic(fmt.Sprintf("kernels: %s stride %d is shorter than the row width %d", name, stride, width))
	}
	if need := (n-1)*stride + width; have < need {
		panic(fmt.Sprintf("kernels: %s has %d values for %d rows of %d at stride %d, want %d", name, have, n, width, stride, need))
	}
}

func checkMatrix(name string, m *Matrix) {
	if err := m.Validate(); err != nil {
		panic(fmt.Sprintf("kernels: %s: %v", name, err))
	}
}

func matMul(y []float32, m *Matrix, x []float32, n, threads int) {
	if n <= 0 {
		return
	}
	checkMatrix("MatMul", m)
	if len(x) < n*m.Cols || len(y) < n*m.Rows {
		panic(fmt.Sprintf("kernels: MatMul of [%d, %d] over %d inputs needs x of %d and y of %d values, have %d and %d",
			m.Rows, m.Cols, n, n*m.Cols, n*m.Rows, len(x), len(y)))
	}
	parts := parallelism(threads, matMulWork(m, n), m.Rows, rowAlign)
	if parts <= 1 {
		matMulRange(y, m, x, n, 0, m.Rows)
		return
	}
	split(m.Rows, parts, rowAlign, func(r0, r1 int) {
		matMulRange(y, m, x, n, r0, r1)
	})
}

// matMulWork is the weight bytes of m scaled by the batch: decoding a chunk
// costs about as much as applying it to two inputs.
func matMulWork(m *Matrix, n int) int {
	return m.Rows * m.RowBytes() * (n + 1) / 2
}

func vecMat(y []float32, m *Matrix, x []float32, threads int) {
	checkMatrix("VecMat", m)
	if len(x) < m.Rows || len(y) < m.Cols {
		panic(fmt.Sprintf("kernels: VecMat of [%d, %d] needs x of %d and y of %d values, have %d and %d",
			m.Rows, m.Cols, m.Rows, m.Cols, len(x), len(y)))
	}
	parts := parallelism(threads, m.Rows*m.RowBytes(), m.Cols, colAlign)
	if parts <= 1 {
		vecMatRange(y, m, x, 0, m.Cols)
		return
	}
	split(m.Cols, parts, colAlign, func(c0, c1 int) {
		vecMatRange(y, m, x, c0, c1)
	})
}

func dotRows(out, a []float32, n, width int, rows []float32, stride, keys, threads int) {
	parts := parallelism(threads, 4*keys*width*(n+1)/2, keys, rowAlign)
	split(keys, parts, rowAlign, func(t0, t1 int) {
		f32DotsRange(out, a, n, width, rows, stride, keys, t0, t1)
	})
}

func weightedSum(y, coef []float32, n int, rows []float32, keys, stride, width, threads int) {
	parts := parallelism(threads, 4*keys*width*n, width, colAlign)
	split(width, parts, colAlign, func(c0, c1 int) {
		f32WSumRange(y, coef, n, rows, keys, stride, width, c0, c1)
	})
}

// parallelism is the number of threads worth using for work bytes spread over
// total units (rows or columns) that are split on multiples of align.
func parallelism(threads, work, total, align int) int {
	p := min(threads, work/minParallelBytes, (total+align-1)/align)
	return max(p, 1)
}

// split calls fn on ranges covering [0, total) exactly once, whose bounds
// are multiples of align (but the last), on parts goroutines (the caller's
// included), and returns when all are done. The ranges are claimed from an
// atomic counter a few at a time, so a slow core (an efficiency core beside
// performance cores, or one the OS took away) holds up a product by at most
// one chunk instead of a fixed 1/parts share. Results may not depend on
// which goroutine runs which range: every kernel here computes each row or
// column the same way whatever range it is in.
func split(total, parts, align int, fn func(lo, hi int)) {
	splitWorkers(total, parts, align, func(_, lo, hi int) { fn(lo, hi) })
}

// chunksPerWorker is how many chunks each goroutine of a split gets on
// average: enough that a worker running at half speed costs about one
// chunk of delay, few enough that claiming one stays negligible next to
// the 128 KiB of weights each goroutine is started for.
const chunksPerWorker = 4

// splitWorkers is split that also tells fn which worker (0 is the caller)
// runs each range: the seam the balancing test slows one worker through.
func splitWorkers(total, parts, align int, fn func(w, lo, hi int)) {
	if parts <= 1 || total <= align {
		fn(0, 0, total)
		return
	}
	units := (total + align - 1) / align
	parts = min(parts, units)
	Spread(total, max(1, units/(chunksPerWorker*parts))*align, parts, fn)
}

// Spread runs fn over [0, total) in ranges of grain (the last one
// shorter), claimed from a shared counter by the caller (worker 0) and by
// up to workers-1 helper goroutines, so that uneven ranges and unequal
// cores balance. It returns once every range has run, without waiting for
// the helpers themselves: one the scheduler starts late finds nothing left
// and ends on its own instead of holding the caller up. (Waiting for every
// helper cost a thread wake-up, about 0.1 ms, on each product: on 16
// cores, longer than a decode step's expert product itself.) fn gets the
// index w < workers of the goroutine running it, for per-worker buffers;
// no fn call is running or starts once Spread has returned.
func Spread(total, grain, workers int, fn func(w, lo, hi int)) {
	if total <= 0 {
		return
	}
	grain = max(grain, 1)
	ranges := (total + grain - 1) / grain
	if workers = min(workers, ranges); workers <= 1 {
		fn(0, 0, total)
		return
	}
	var next atomic.Int64
	var left sync.WaitGroup // ranges not yet run, not goroutines
	left.Add(ranges)
	run := func(w int) {
		for {
			lo := int(next.Add(int64(grain))) - grain
			if lo >= total {
				return
			}
			fn(w, lo, min(lo+grain, total))
			left.Done()
		}
	}
	for w := 1; w < workers; w++ {
		go run(w)
	}
	run(0)
	left.Wait()
}

// ReadSum reads p with the widest loads this machine has and returns a
// checksum of it: the memory-read probe that weight streaming is measured
// against (a matrix-vector product cannot read its weights faster).
func ReadSum(p []byte) uint64 { return readSum(p) }
