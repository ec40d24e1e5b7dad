package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/native/offheap"
	"github.com/spoolhq/spool/native/sysinfo"
)

// KernelOptions configures Kernels.
type KernelOptions struct {
	// Seconds is the time spent on each measurement (0 means 1).
	Seconds float64
	// WorkingSet is the bytes of weights each measurement cycles through, and
	// the size of the memory probes' buffer (0 means 320 MiB, far above any
	// cache).
	WorkingSet int64
	// Threads is the thread count of kernels and probes (0 means GOMAXPROCS).
	Threads int
}

// KernelResult is what Kernels measured. Matrix figures count every
// byte a product streams, packed weights plus scales, per second of wall
// time; the matrices are GLM-5.2's attention output shape, 6144x16384.
type KernelResult struct {
	Threads         int    `json:"threads"`
	CPUFeatures     string `json:"cpu_features"`
	GOARCH          string `json:"goarch"`
	WorkingSetBytes int64  `json:"working_set_bytes"`
	Rows            int    `json:"rows"`
	Cols            int    `json:"cols"`

	// MemoryReadBytesPerS reads the working set with vector loads on every
	// thread: the ceiling for weight streaming, which is read-dominated.
	MemoryReadBytesPerS float64 `json:"memory_read_bytes_per_s"`
	// MemoryCopyBytesPerS copies half the working set onto the other half on
	// every thread; it counts bytes copied (each read once and written once).
	MemoryCopyBytesPerS float64 `json:"memory_copy_bytes_per_s"`

	Int4G64MatVecBytesPerS float64 `json:"int4_g64_matvec_bytes_per_s"`
	Int4RowMatVecBytesPerS float64 `json:"int4_row_matvec_bytes_per_s"`
	Int8RowMatVecBytesPerS float64 `json:"int8_row_matvec_bytes_per_s"`
	// Int4G64MatMul8BytesPerS is MatMul with n=8: weight bytes per second,
	// each byte serving 8 inputs.
	Int4G64MatMul8BytesPerS float64 `json:"int4_g64_matmul8_bytes_per_s"`

	// Ratio is Int4G64MatVecBytesPerS / MemoryReadBytesPerS.
	Ratio float64 `json:"ratio"`

	// The CPU figures count the same bytes per second of process CPU time
	// divided by the thread count: on a machine shared with other work,
	// wall time includes the time other processes hold the cores, CPU time
	// does not. Zero where the platform has no process CPU clock.
	MemoryReadCPUBytesPerS    float64 `json:"memory_read_cpu_bytes_per_s,omitempty"`
	Int4G64MatVecCPUBytesPerS float64 `json:"int4_g64_matvec_cpu_bytes_per_s,omitempty"`
	// CPURatio is Int4G64MatVecCPUBytesPerS / MemoryReadCPUBytesPerS.
	CPURatio float64 `json:"cpu_ratio,omitempty"`
}

const (
	benchRows = 6144
	benchCols = 16384
)

// Kernels measures the matrix-vector kernels against the machine's memory
// bandwidth, measured the same way (same threads, same working-set size).
// It allocates about 1.2x WorkingSet and takes about 8x Seconds.
func Kernels(ctx context.Context, opts KernelOptions) (KernelResult, error) {
	if opts.Seconds <= 0 {
		opts.Seconds = 1
	}
	if opts.WorkingSet <= 0 {
		opts.WorkingSet = 320 << 20
	}
	if opts.Threads <= 0 {
		opts.Threads = runtime.GOMAXPROCS(0)
	}
	res := KernelResult{
		Threads:     opts.Threads,
		CPUFeatures: kernels.Features(),
		GOARCH:      runtime.GOARCH,
		Rows:        benchRows,
		Cols:        benchCols,
	}
	b := newBencher(ctx, opts)

	i4g := b.matrices(kernels.Int4Group)
	res.WorkingSetBytes = int64(len(b.slab))
	x := make([]float32, 8*benchCols)
	for i := range x {
		x[i] = float32(b.rng.NormFloat64())
	}
	y := make([]float32, 8*benchRows)
	matVec := func(ms []*kernels.Matrix, n int) func(int) int64 {
		return func(i int) int64 {
			m := ms[i%len(ms)]
			kernels.MatMulThreads(y, m, x, n, opts.Threads)
			return int64(len(m.Data) + 4*len(m.Scales))
		}
	}

	// Alternate the two figures of the ratio and keep the best of each, so
	// that a burst of load from elsewhere does not skew the ratio.
	for range 2 {
		wall, cpu := b.rate(b.read)
		res.MemoryReadBytesPerS = max(res.MemoryReadBytesPerS, wall)
		res.MemoryReadCPUBytesPerS = max(res.MemoryReadCPUBytesPerS, cpu)
		wall, cpu = b.rate(matVec(i4g, 1))
		res.Int4G64MatVecBytesPerS = max(res.Int4G64MatVecBytesPerS, wall)
		res.Int4G64MatVecCPUBytesPerS = max(res.Int4G64MatVecCPUBytesPerS, cpu)
	}
	res.Int4G64MatMul8BytesPerS, _ = b.rate(matVec(i4g, 8))
	res.Int4RowMatVecBytesPerS, _ = b.rate(matVec(b.matrices(kernels.Int4Row), 1))
	res.Int8RowMatVecBytesPerS, _ = b.rate(matVec(b.matrices(kernels.Int8Row), 1))
	res.MemoryCopyBytesPerS, _ = b.rate(b.copy)
	if b.err != nil {
		return KernelResult{}, fmt.Errorf("bench: kernels: %w", b.err)
	}
	if res.MemoryReadBytesPerS > 0 {
		res.Ratio = res.Int4G64MatVecBytesPerS / res.MemoryReadBytesPerS
	}
	if res.MemoryReadCPUBytesPerS > 0 {
		res.CPURatio = res.Int4G64MatVecCPUBytesPerS / res.MemoryReadCPUBytesPerS
	}
	return res, nil
}

// bencher holds one benchmark run's buffers; err is the first cancellation.
type bencher struct {
	ctx  context.Context
	opts KernelOptions
	rng  *rand.Rand
	slab []byte
	err  error
	sink uint64
}

func newBencher(ctx context.Context, opts KernelOptions) *bencher {
	b := &bencher{ctx: ctx, opts: opts, rng: rand.New(rand.NewPCG(1, 2))}
	b.slab = make([]byte, opts.WorkingSet)
	// Fill with random bytes: touches every page, and makes the weights
	// arbitrary nibbles.
	fill := b.slab[:min(len(b.slab), 1<<20)]
	for i := range fill {
		fill[i] = byte(b.rng.Uint32())
	}
	for done := len(fill); done < len(b.slab); {
		done += copy(b.slab[done:], b.slab[:done])
	}
	return b
}

// matrices carves as many 6144x16384 matrices of format f out of the slab as
// fit (at least one, views over the same bytes), with their own scales.
func (b *bencher) matrices(f kernels.Format) []*kernels.Matrix {
	proto := kernels.Matrix{Format: f, Rows: benchRows, Cols: benchCols, GroupSize: 64}
	size := benchRows * proto.RowBytes()
	if size > len(b.slab) {
		b.slab = append(b.slab, make([]byte, size-len(b.slab))...)
	}
	var out []*kernels.Matrix
	for off := 0; off+size <= len(b.slab); off += size {
		m := proto
		m.Data = b.slab[off : off+size]
		m.Scales = make([]float32, benchRows*m.ScalesPerRow())
		for i := range m.Scales {
			m.Scales[i] = 0.01 + 0.01*b.rng.Float32()
		}
		out = append(out, &m)
	}
	return out
}

// rate runs op(0), op(1), ... for opts.Seconds after one warm-up call and
// returns the bytes op reported per second of wall time and per second of
// process CPU time over the thread count (0 without a CPU clock).
func (b *bencher) rate(op func(i int) int64) (wall, cpu float64) {
	if b.err != nil {
		return 0, 0
	}
	op(0)
	var bytes int64
	start, cpu0 := time.Now(), sysinfo.ProcessCPUTime()
	budget := time.Duration(b.opts.Seconds * float64(time.Second))
	for i := 1; ; i++ {
		if err := b.ctx.Err(); err != nil {
			b.err = err
			return 0, 0
		}
		bytes += op(i)
		if el := time.Since(start); el >= budget {
			wall = float64(bytes) / el.Seconds()
			if c := sysinfo.ProcessCPUTime() - cpu0; cpu0 > 0 && c > 0 {
				cpu = float64(bytes) / (c.Seconds() / float64(b.opts.Threads))
			}
			return wall, cpu
		}
	}
}

// read is one pass of the memory read probe over the whole slab.
func (b *bencher) read(int) int64 {
	sums := make([]uint64, b.opts.Threads)
	part := (len(b.slab)/b.opts.Threads + 127) / 128 * 128
	onThreads(b.opts.Threads, func(t int) {
		lo := min(t*part, len(b.slab))
		sums[t] = kernels.ReadSum(b.slab[lo:min(lo+part, len(b.slab))])
	})
	for _, s := range sums {
		b.sink += s
	}
	return int64(len(b.slab))
}

// copy is one pass of the memory copy probe: first half onto second half.
func (b *bencher) copy(int) int64 {
	half := len(b.slab) / 2
	src, dst := b.slab[:half], b.slab[half:2*half]
	part := (half + b.opts.Threads - 1) / b.opts.Threads
	onThreads(b.opts.Threads, func(t int) {
		lo := min(t*part, half)
		hi := min(lo+part, half)
		copy(dst[lo:hi], src[lo:hi])
	})
	return int64(half)
}

// onThreads runs fn(0), ..., fn(n-1) on n goroutines (fn(n-1) on the
// caller's) and waits for them.
func onThreads(n int, fn func(t int)) {
	var wg sync.WaitGroup
	for t := 0; t < n-1; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(t)
		}()
	}
	fn(n - 1)
	wg.Wait()
}

// ExpertOptions configures ExpertProducts.
type ExpertOptions struct {
	// Hidden and Inter are the expert's shape: gate and up are Inter x
	// Hidden, down Hidden x Inter (0: GLM-5.2's 6144 and 2048).
	Hidden, Inter int
	// Threads is the thread count of each product (0 means GOMAXPROCS).
	Threads int
	// Seconds is the time of each round (0 means 0.25); Rounds the rounds,
	// of which the median is kept (0 means 5).
	Seconds float64
	Rounds  int
	// WorkingSet is the bytes of experts cycled through (0 means 320 MiB,
	// far above any cache, as experts streamed in are).
	WorkingSet int64
}

// ExpertProducts measures decode's product the way decode runs it (int4
// weights with a scale per row, the format of the artifact's experts and
// the bench models'): one
// token's row through one routed expert after another (gate and up on the
// input, SiLU(gate)*up, down on that), each product on every thread, so
// that the per-product costs of small matrices (handing work to the
// threads, their wake-up, the tail of the split) count as they do in a
// forward. It returns the expert weight bytes (packed weights and scales)
// applied per second of wall time, the median of the rounds (one round
// that meets someone else's burst of work does not decide the figure), and
// the same per second of process CPU time over the threads (0 without a
// CPU clock): the first over the second is the share of the cores the
// products got.
func ExpertProducts(ctx context.Context, o ExpertOptions) (wall, cpu float64, err error) {
	if o.Hidden <= 0 {
		o.Hidden = 6144
	}
	if o.Inter <= 0 {
		o.Inter = 2048
	}
	if o.Threads <= 0 {
		o.Threads = runtime.GOMAXPROCS(0)
	}
	if o.Seconds <= 0 {
		o.Seconds = 0.25
	}
	if o.Rounds <= 0 {
		o.Rounds = 5
	}
	if o.WorkingSet <= 0 {
		o.WorkingSet = 320 << 20
	}
	// The experts live where streamed ones do: an off-heap mapping like
	// the slabs (on Linux, on transparent huge pages as theirs are), filled
	// with random bytes from the bencher's small heap slab.
	b := newBencher(ctx, KernelOptions{Seconds: o.Seconds, WorkingSet: 1 << 20, Threads: o.Threads})
	shape := func(rows, cols int) kernels.Matrix {
		return kernels.Matrix{Format: kernels.Int4Row, Rows: rows, Cols: cols}
	}
	protos := [3]kernels.Matrix{shape(o.Inter, o.Hidden), shape(o.Inter, o.Hidden), shape(o.Hidden, o.Inter)}
	var expertBytes int
	for _, m := range protos {
		expertBytes += m.Rows * m.RowBytes()
	}
	slab, err := offheap.AllocAligned(max(int(o.WorkingSet), expertBytes), 4096)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: expert products: %w", err)
	}
	defer offheap.Free(slab)
	for done := 0; done < len(slab); {
		done += copy(slab[done:], b.slab)
	}
	var ms [][3]*kernels.Matrix
	var bytes int64
	for off := 0; off+expertBytes <= len(slab); {
		var e [3]*kernels.Matrix
		for j, proto := range protos {
			m := proto
			n := m.Rows * m.RowBytes()
			m.Data = slab[off : off+n]
			off += n
			m.Scales = make([]float32, m.Rows*m.ScalesPerRow())
			for i := range m.Scales {
				m.Scales[i] = 0.01 + 0.01*b.rng.Float32()
			}
			e[j] = &m
			if len(ms) == 0 {
				bytes += int64(len(m.Data) + 4*len(m.Scales))
			}
		}
		ms = append(ms, e)
	}
	x := make([]float32, o.Hidden)
	for i := range x {
		x[i] = float32(b.rng.NormFloat64())
	}
	g, u, y := make([]float32, o.Inter), make([]float32, o.Inter), make([]float32, o.Hidden)
	apply := func(i int) int64 {
		e := ms[i%len(ms)]
		kernels.MatMulThreads(g, e[0], x, 1, o.Threads)
		kernels.MatMulThreads(u, e[1], x, 1, o.Threads)
		for j := range g {
			g[j] = g[j] / (1 + float32(math.Exp(float64(-g[j])))) * u[j]
		}
		kernels.MatMulThreads(y, e[2], g, 1, o.Threads)
		return bytes
	}
	walls, cpus := make([]float64, o.Rounds), make([]float64, o.Rounds)
	for i := range walls {
		walls[i], cpus[i] = b.rate(apply)
	}
	if b.err != nil {
		return 0, 0, fmt.Errorf("bench: expert products: %w", b.err)
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	return walls[len(walls)/2], cpus[len(cpus)/2], nil
}
