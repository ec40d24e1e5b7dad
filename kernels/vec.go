package kernels

// Vector helpers for attention and residual arithmetic. They are plain Go:
// at head-sized lengths (64-256) a cgo call would cost more than the work.
// For many dot products against a cache use DotRows and WeightedSum, which
// batch the work into one SIMD call, or DotRowsMulti and WeightedSumMulti,
// which do it for several queries (heads) in one call.

// Dot returns sum_i a[i] b[i] over len(a) values (b must be at least as
// long). It sums four interleaved partial sums (i mod 4) and adds them as
// (s0+s1)+(s2+s3), a fixed order.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Axpy adds a*x[i] to y[i] for i < len(y) (x must be at least as long).
func Axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] += a * v
	}
}

// Scale multiplies every value of x by a.
func Scale(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

// Add adds x[i] to y[i] for i < len(y) (x must be at least as long): the
// residual connection.
func Add(y, x []float32) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] += v
	}
}
