//go:build !cgo || !(amd64 || arm64)

package kernels

// Without cgo (or on another architecture) every kernel is the portable Go
// code of generic.go.

// Features names the instruction set the kernels use on this machine.
func Features() string { return "generic (pure Go)" }

func permuteInput(*Matrix, []float32, int) []float32 { return nil }

func matMulRange(y []float32, m *Matrix, x, _ []float32, n, r0, r1 int) {
	goMatMulRange(y, m, x, n, r0, r1)
}

func vecMatScratch(*Matrix) []float32 { return nil }

func vecMatRange(y []float32, m *Matrix, x, _ []float32, c0, c1 int) {
	goVecMatRange(y, m, x, c0, c1)
}

func f32MatVecRange(out []float32, m *Matrix, stride int, x []float32, r0, r1 int) {
	goF32MatVecRange(out, m, stride, x, r0, r1)
}

func f32VecMatRange(y []float32, m *Matrix, stride int, x []float32, c0, c1 int) {
	goF32VecMatRange(y, m, stride, x, c0, c1)
}

func readSum(p []byte) uint64 { return goReadSum(p) }
