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

// goF32DotsRange sets out[b*ys+t] for rows t in [t0, t1) and queries b < n
// to the dot product of a[b*width:][:width] with the row stored at
// rows[t*stride:], in column order.
func goF32DotsRange(out, a []float32, n, width int, rows []float32, stride, ys, t0, t1 int) {
	for b := range n {
		q := a[b*width : (b+1)*width]
		for t := t0; t < t1; t++ {
			var acc float32
			for i, w := range rows[t*stride : t*stride+width] {
				acc += w * q[i]
			}
			out[b*ys+t] = acc
		}
	}
}

// goF32WSumRange sets y[b*width+i] for i in [c0, c1) and b < n to
// sum_t coef[b*nrows+t] rows[t*stride+i], in row order.
func goF32WSumRange(y, coef []float32, n int, rows []float32, nrows, stride, width, c0, c1 int) {
	for b := range n {
		yb := y[b*width+c0 : b*width+c1]
		clear(yb)
		for t, ct := range coef[b*nrows : (b+1)*nrows] {
			for i, w := range rows[t*stride+c0 : t*stride+c1] {
				yb[i] += ct * w
			}
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
