//go:build !cgo || !(amd64 || arm64)

package kernels

// Without cgo (or on another architecture) every kernel is the portable Go
// code of generic.go.

// Features names the instruction set the kernels use on this machine.
func Features() string { return "generic (pure Go)" }

func matMulRange(y []float32, m *Matrix, x []float32, n, r0, r1 int) {
	goMatMulRange(y, m, x, n, r0, r1)
}

func vecMatRange(y []float32, m *Matrix, x []float32, c0, c1 int) {
	goVecMatRange(y, m, x, c0, c1)
}

func f32DotsRange(out, a []float32, n, width int, rows []float32, stride, ys, t0, t1 int) {
	goF32DotsRange(out, a, n, width, rows, stride, ys, t0, t1)
}

func f32WSumRange(y, coef []float32, n int, rows []float32, nrows, stride, width, c0, c1 int) {
	goF32WSumRange(y, coef, n, rows, nrows, stride, width, c0, c1)
}

func readSum(p []byte) uint64 { return goReadSum(p) }
