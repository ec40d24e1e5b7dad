package kernels

import "encoding/binary"

// Portable kernels, used where the SIMD path is unavailable (no cgo, another
// architecture, an amd64 CPU without AVX2+FMA). They follow the reference
// accumulation order exactly; each output depends only on its own row (or
// column) and input, so thread splits and batching do not change results.

// goMatMulRange computes rows [r0, r1) of MatMul.
func goMatMulRange(y []float32, m *Matrix, x []float32, n, r0, r1 int) {
	for b := 0; b < n; b++ {
		xb := x[b*m.Cols : (b+1)*m.Cols]
		yb := y[b*m.Rows : (b+1)*m.Rows]
		for r := r0; r < r1; r++ {
			yb[r] = rowDotRef(m, r, xb)
		}
	}
}

// goVecMatRange computes columns [c0, c1) of VecMat, as VecMatRef does.
func goVecMatRange(y []float32, m *Matrix, x []float32, c0, c1 int) {
	y = y[c0:c1]
	clear(y)
	gs := m.Cols
	if m.Format == Int4Group {
		gs = m.GroupSize
	}
	sp, rb := m.ScalesPerRow(), m.RowBytes()
	for r := 0; r < m.Rows; r++ {
		xr := x[r]
		switch m.Format {
		case F32:
			for i, w := range m.F32[r*m.Cols+c0 : r*m.Cols+c1] {
				y[i] += xr * w
			}
		case Int8Row:
			s := m.Scales[r]
			for i, b := range m.Data[r*m.Cols+c0 : r*m.Cols+c1] {
				y[i] += xr * (float32(int8(b)) * s)
			}
		default:
			row := m.Data[r*rb : (r+1)*rb]
			scales := m.Scales[r*sp : (r+1)*sp]
			for i := c0; i < c1; i++ {
				b := row[i>>1]
				nib := b & 0x0f
				if i&1 == 1 {
					nib = b >> 4
				}
				y[i-c0] += xr * (float32(int(nib)-8) * scales[i/gs])
			}
		}
	}
}

// goF32MatVecRange sets out[r] for r in [r0, r1) to the dot product of x with
// the f32 row r of m stored stride values apart.
func goF32MatVecRange(out []float32, m *Matrix, stride int, x []float32, r0, r1 int) {
	for r := r0; r < r1; r++ {
		var acc float32
		for i, w := range m.F32[r*stride : r*stride+m.Cols] {
			acc += w * x[i]
		}
		out[r] = acc
	}
}

// goF32VecMatRange sets y[i] for i in [c0, c1) to sum_r x[r] W[r, i] over f32
// rows stored stride values apart.
func goF32VecMatRange(y []float32, m *Matrix, stride int, x []float32, c0, c1 int) {
	y = y[c0:c1]
	clear(y)
	for r := 0; r < m.Rows; r++ {
		xr := x[r]
		for i, w := range m.F32[r*stride+c0 : r*stride+c1] {
			y[i] += xr * w
		}
	}
}

// goReadSum reads p eight bytes at a time and returns a checksum.
func goReadSum(p []byte) uint64 {
	var s0, s1, s2, s3 uint64
	for i := 0; i+32 <= len(p); i += 32 {
		q := p[i : i+32 : i+32]
		s0 += binary.LittleEndian.Uint64(q[0:])
		s1 += binary.LittleEndian.Uint64(q[8:])
		s2 += binary.LittleEndian.Uint64(q[16:])
		s3 += binary.LittleEndian.Uint64(q[24:])
	}
	return s0 + s1 + s2 + s3
}
