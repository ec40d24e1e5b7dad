package kernels

// MatVecRef is the reference y[r] = sum_i W[r,i] x[i] for every row r.
//
// Accumulation order: for quantized formats, per scale group the
// integer-valued products q*x are summed in float32 in column order, then
// multiplied by the group's scale and added to the row's float32
// accumulator. Fast paths keep the structure that matters (per-group float32
// partial sums of q*x, then times the scale) and stay within 1e-5 of
// sum|w x| of this reference, but sum in another fixed order: the SIMD
// kernels use 16 lanes of 16-column chunks and a fixed lane tree (see
// simd.c), the same on every instruction set; the pure-Go fallback uses
// exactly this order.
func MatVecRef(y []float32, m *Matrix, x []float32) {
	for r := 0; r < m.Rows; r++ {
		y[r] = rowDotRef(m, r, x)
	}
}

// MatMulRef is the reference Y[n, Rows] = X[n, Cols] W^T.
func MatMulRef(y []float32, m *Matrix, x []float32, n int) {
	for b := 0; b < n; b++ {
		MatVecRef(y[b*m.Rows:(b+1)*m.Rows], m, x[b*m.Cols:(b+1)*m.Cols])
	}
}

// VecMatRef is the reference y[i] = sum_r x[r] W[r,i] (x has Rows values, y Cols).
func VecMatRef(y []float32, m *Matrix, x []float32) {
	y = y[:m.Cols]
	for i := range y {
		y[i] = 0
	}
	row := make([]float32, m.Cols)
	for r := 0; r < m.Rows; r++ {
		DequantRow(row, m, r)
		xr := x[r]
		for i, w := range row {
			y[i] += xr * w
		}
	}
}

func rowDotRef(m *Matrix, r int, x []float32) float32 {
	switch m.Format {
	case F32:
		var acc float32
		for i, w := range m.F32[r*m.Cols : (r+1)*m.Cols] {
			acc += w * x[i]
		}
		return acc
	case Int8Row:
		var acc float32
		for i, b := range m.Data[r*m.Cols : (r+1)*m.Cols] {
			acc += float32(int8(b)) * x[i]
		}
		return acc * m.Scales[r]
	}
	rb := m.RowBytes()
	row := m.Data[r*rb : (r+1)*rb]
	gs := m.Cols
	if m.Format == Int4Group {
		gs = m.GroupSize
	}
	sp := m.ScalesPerRow()
	scales := m.Scales[r*sp : (r+1)*sp]
	var acc float32
	for g0 := 0; g0 < m.Cols; g0 += gs {
		g1 := min(g0+gs, m.Cols)
		var part float32
		for i := g0; i < g1; i++ {
			b := row[i>>1]
			nib := b & 0x0f
			if i&1 == 1 {
				nib = b >> 4
			}
			part += float32(int(nib)-8) * x[i]
		}
		acc += part * scales[g0/gs]
	}
	return acc
}
