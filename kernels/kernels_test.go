package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// relTol bounds |fast - reference| relative to sum |w x| of the output: the
// float32 rounding of a few hundred differently ordered additions stays far
// below it, a wrong weight or a dropped column does not.
const relTol = 1e-5

type shape struct {
	format     Format
	rows, cols int
	gs         int
}

func (s shape) String() string {
	if s.format == Int4Group {
		return fmt.Sprintf("%s-g%d-%dx%d", s.format, s.gs, s.rows, s.cols)
	}
	return fmt.Sprintf("%s-%dx%d", s.format, s.rows, s.cols)
}

// testShapes covers odd sizes, columns that are not multiples of the SIMD
// width or of the group size, short last groups, groups not a multiple of 64
// and single rows.
func testShapes() []shape {
	var out []shape
	colsList := []int{1, 2, 7, 8, 31, 33, 63, 64, 65, 127, 128, 129, 200, 257, 384}
	for _, rows := range []int{1, 3, 4, 5, 9} {
		for _, cols := range colsList {
			out = append(out,
				shape{F32, rows, cols, 0},
				shape{Int8Row, rows, cols, 0},
				shape{Int4Row, rows, cols, 0},
				shape{Int4Group, rows, cols, 64},
				shape{Int4Group, rows, cols, 128},
				shape{Int4Group, rows, cols, 32},
				shape{Int4Group, rows, cols, 7},
			)
		}
	}
	return append(out,
		shape{Int4Group, 37, 1000, 64},
		shape{Int4Group, 33, 640, 192},
		shape{Int4Row, 21, 515, 0},
		shape{Int8Row, 19, 333, 0},
		shape{F32, 23, 301, 0},
	)
}

func randMatrix(rng *rand.Rand, s shape) *Matrix {
	m := &Matrix{Format: s.format, Rows: s.rows, Cols: s.cols, GroupSize: s.gs}
	if s.format == F32 {
		m.F32 = randVec(rng, s.rows*s.cols)
		return m
	}
	m.Data = make([]byte, s.rows*m.RowBytes())
	for i := range m.Data {
		m.Data[i] = byte(rng.Uint32())
	}
	m.Scales = make([]float32, s.rows*m.ScalesPerRow())
	for i := range m.Scales {
		m.Scales[i] = 0.001 + 0.1*rng.Float32()
	}
	return m
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// absDots returns sum_i |W[r,i] x[i]| for every row of m.
func absDots(m *Matrix, x []float32) []float64 {
	out := make([]float64, m.Rows)
	row := make([]float32, m.Cols)
	for r := range out {
		DequantRow(row, m, r)
		for i, w := range row {
			out[r] += math.Abs(float64(w) * float64(x[i]))
		}
	}
	return out
}

func checkClose(t *testing.T, what string, got, want []float32, scale []float64) {
	t.Helper()
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if d > relTol*scale[i]+1e-30 || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s[%d] = %g, reference %g (diff %g, sum|wx| %g)", what, i, got[i], want[i], d, scale[i])
		}
	}
}

// dequantMatMul is an independent reference for MatMul: every row
// dequantized with DequantRow and multiplied in float64. (MatMulRef shares
// rowDotRef with the portable kernels, so it cannot check them.)
func dequantMatMul(y []float32, m *Matrix, x []float32, n int) {
	row := make([]float32, m.Cols)
	for r := 0; r < m.Rows; r++ {
		DequantRow(row, m, r)
		for b := 0; b < n; b++ {
			var acc float64
			for i, w := range row {
				acc += float64(w) * float64(x[b*m.Cols+i])
			}
			y[b*m.Rows+r] = float32(acc)
		}
	}
}

// TestMatMulMatchesReference checks MatMul (SIMD or portable, whichever
// this build runs) against the float64 product of the dequantized rows,
// within relTol of sum|w x| per output.
func TestMatMulMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range testShapes() {
		t.Run(s.String(), func(t *testing.T) {
			m := randMatrix(rng, s)
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 2, 5, 8, 9, 17} {
				x := randVec(rng, n*s.cols)
				got := make([]float32, n*s.rows)
				want := make([]float32, n*s.rows)
				MatMul(got, m, x, n)
				dequantMatMul(want, m, x, n)
				for b := range n {
					xb := x[b*s.cols : (b+1)*s.cols]
					sc := absDots(m, xb)
					checkClose(t, fmt.Sprintf("n=%d y[%d]", n, b), got[b*s.rows:(b+1)*s.rows], want[b*s.rows:(b+1)*s.rows], sc)
				}
			}
		})
	}
}

// TestMatMulRowsEqualMatVec is the determinism contract: every row of a
// batched product is bit-identical to the single-row product.
func TestMatMulRowsEqualMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range testShapes() {
		t.Run(s.String(), func(t *testing.T) {
			m := randMatrix(rng, s)
			for n := 1; n <= 17; n++ {
				x := randVec(rng, n*s.cols)
				y := make([]float32, n*s.rows)
				MatMul(y, m, x, n)
				one := make([]float32, s.rows)
				for b := range n {
					MatVec(one, m, x[b*s.cols:(b+1)*s.cols])
					for r, v := range one {
						if got := y[b*s.rows+r]; math.Float32bits(got) != math.Float32bits(v) {
							t.Fatalf("n=%d: MatMul y[%d][%d] = %g, MatVec gives %g", n, b, r, got, v)
						}
					}
				}
			}
		})
	}
}

// TestThreadCountIndependence runs shapes large enough to be split and
// requires bit-identical results for every thread count.
func TestThreadCountIndependence(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	shapes := []shape{
		{Int4Group, 1001, 1000, 64},
		{Int4Row, 999, 777, 0},
		{Int8Row, 517, 700, 0},
		{F32, 301, 500, 0},
		{Int4Group, 400, 1500, 32},
	}
	for _, s := range shapes {
		t.Run(s.String(), func(t *testing.T) {
			m := randMatrix(rng, s)
			for _, n := range []int{1, 3, 8} {
				x := randVec(rng, n*s.cols)
				base := make([]float32, n*s.rows)
				matMul(base, m, x, n, 1)
				for _, threads := range []int{2, 3, 7} {
					if parallelism(threads, matMulWork(m, n), m.Rows, rowAlign) < 2 {
						t.Fatalf("shape too small to split over %d threads", threads)
					}
					y := make([]float32, n*s.rows)
					matMul(y, m, x, n, threads)
					requireIdentical(t, fmt.Sprintf("MatMul n=%d threads=%d", n, threads), y, base)
				}
			}
			xr := randVec(rng, s.rows)
			base := make([]float32, s.cols)
			vecMat(base, m, xr, 1)
			for _, threads := range []int{2, 3, 7} {
				y := make([]float32, s.cols)
				vecMat(y, m, xr, threads)
				requireIdentical(t, fmt.Sprintf("VecMat threads=%d", threads), y, base)
			}
		})
	}
}

func requireIdentical(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: [%d] = %g, single thread gives %g", what, i, got[i], want[i])
		}
	}
}

func TestVecMatMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range testShapes() {
		t.Run(s.String(), func(t *testing.T) {
			m := randMatrix(rng, s)
			x := randVec(rng, s.rows)
			got := make([]float32, s.cols)
			for i := range got {
				got[i] = float32(math.NaN()) // VecMat must overwrite, not accumulate
			}
			want := make([]float32, s.cols)
			VecMat(got, m, x)
			VecMatRef(want, m, x)
			scale := make([]float64, s.cols)
			row := make([]float32, s.cols)
			for r := range s.rows {
				DequantRow(row, m, r)
				for i, w := range row {
					scale[i] += math.Abs(float64(w) * float64(x[r]))
				}
			}
			checkClose(t, "y", got, want, scale)
		})
	}
}

// TestGenericMatchesReference pins the portable fallback to the reference
// bit for bit (it is the reference order, just split into ranges).
func TestGenericMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, s := range testShapes() {
		m := randMatrix(rng, s)
		x := randVec(rng, 3*s.cols)
		got := make([]float32, 3*s.rows)
		want := make([]float32, 3*s.rows)
		goMatMulRange(got, m, x, 3, 0, s.rows)
		MatMulRef(want, m, x, 3)
		requireIdentical(t, s.String()+" goMatMulRange", got, want)

		xr := randVec(rng, s.rows)
		gotT := make([]float32, s.cols)
		wantT := make([]float32, s.cols)
		goVecMatRange(gotT, m, xr, 0, s.cols)
		VecMatRef(wantT, m, xr)
		requireIdentical(t, s.String()+" goVecMatRange", gotT, wantT)
	}
}

func TestDotRowsAndWeightedSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	tests := []struct{ n, width, stride int }{
		{1, 1, 1}, {5, 64, 64}, {17, 128, 192}, {33, 63, 70}, {300, 576, 576}, {2000, 512, 576},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%dx%d/%d", tc.n, tc.width, tc.stride), func(t *testing.T) {
			rows := randVec(rng, (tc.n-1)*tc.stride+tc.width)
			a := randVec(rng, tc.width)
			out := make([]float32, tc.n)
			DotRows(out, a, rows, tc.stride)
			for r := range tc.n {
				want, sc := dot64(a, rows[r*tc.stride:])
				if d := math.Abs(float64(out[r]) - want); d > relTol*sc {
					t.Fatalf("DotRows[%d] = %g, want %g", r, out[r], want)
				}
			}
			coef := randVec(rng, tc.n)
			y := make([]float32, tc.width)
			WeightedSum(y, coef, rows, tc.stride)
			for i := range y {
				var want, sc float64
				for r := range tc.n {
					p := float64(coef[r]) * float64(rows[r*tc.stride+i])
					want += p
					sc += math.Abs(p)
				}
				if d := math.Abs(float64(y[i]) - want); d > relTol*sc {
					t.Fatalf("WeightedSum[%d] = %g, want %g", i, y[i], want)
				}
			}
		})
	}
}

func dot64(a, b []float32) (sum, abs float64) {
	for i, v := range a {
		p := float64(v) * float64(b[i])
		sum += p
		abs += math.Abs(p)
	}
	return sum, abs
}

func TestVectorHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{0, 1, 3, 4, 5, 64, 129} {
		a, b := randVec(rng, n), randVec(rng, n+2)
		want, sc := dot64(a, b)
		if got := Dot(a, b); math.Abs(float64(got)-want) > relTol*sc+1e-30 {
			t.Errorf("Dot(n=%d) = %g, want %g", n, got, want)
		}
		y := append([]float32(nil), a...)
		Axpy(y, 0.5, b)
		for i := range y {
			if w := a[i] + 0.5*b[i]; y[i] != w {
				t.Fatalf("Axpy[%d] = %g, want %g", i, y[i], w)
			}
		}
		Add(y, b)
		Scale(y, 2)
		for i := range y {
			if w := 2 * (a[i] + 0.5*b[i] + b[i]); y[i] != w {
				t.Fatalf("Add+Scale[%d] = %g, want %g", i, y[i], w)
			}
		}
	}
}

func TestBadArgumentsPanicWithMessage(t *testing.T) {
	m := &Matrix{Format: Int4Group, Rows: 2, Cols: 128, GroupSize: 64, Data: make([]byte, 128), Scales: make([]float32, 4)}
	tests := []struct {
		name string
		call func()
	}{
		{"short x", func() { MatVec(make([]float32, 2), m, make([]float32, 127)) }},
		{"short y", func() { MatMul(make([]float32, 3), m, make([]float32, 256), 2) }},
		{"missing scales", func() {
			bad := *m
			bad.Scales = bad.Scales[:3]
			MatVec(make([]float32, 2), &bad, make([]float32, 128))
		}},
		{"short VecMat y", func() { VecMat(make([]float32, 100), m, make([]float32, 2)) }},
		{"DotRows stride", func() { DotRows(make([]float32, 2), make([]float32, 8), make([]float32, 16), 4) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				msg, ok := recover().(string)
				if !ok || len(msg) < len("kernels: ") || msg[:9] != "kernels: " {
					t.Fatalf("recovered %v, want a kernels: message", msg)
				}
			}()
			tc.call()
		})
	}
}

// FuzzMatVec builds matrices from arbitrary bytes and checks the fast path
// against the reference and against the batched path.
func FuzzMatVec(f *testing.F) {
	f.Add(uint8(3), uint8(2), uint16(130), uint8(64), []byte{1, 2, 3, 250})
	f.Add(uint8(1), uint8(1), uint16(1), uint8(1), []byte{0x88})
	f.Add(uint8(2), uint8(7), uint16(65), uint8(0), []byte{0x7f, 0x80})
	f.Fuzz(func(t *testing.T, format, rows uint8, cols uint16, gs uint8, seed []byte) {
		s := shape{Format(format % 4), int(rows%9) + 1, int(cols%700) + 1, int(gs%130) + 1}
		var k uint64
		for _, b := range seed {
			k = k*131 + uint64(b)
		}
		rng := rand.New(rand.NewPCG(k, uint64(len(seed))))
		m := randMatrix(rng, s)
		x := randVec(rng, 2*s.cols)
		got := make([]float32, 2*s.rows)
		want := make([]float32, 2*s.rows)
		MatMul(got, m, x, 2)
		MatMulRef(want, m, x, 2)
		one := make([]float32, s.rows)
		for b := range 2 {
			xb := x[b*s.cols : (b+1)*s.cols]
			checkClose(t, s.String(), got[b*s.rows:(b+1)*s.rows], want[b*s.rows:(b+1)*s.rows], absDots(m, xb))
			MatVec(one, m, xb)
			requireIdentical(t, s.String()+" MatVec vs MatMul", one, got[b*s.rows:(b+1)*s.rows])
		}
	})
}
