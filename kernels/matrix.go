package kernels

import (
	"errors"
	"fmt"
)

// Format is the encoding of a weight matrix's bytes (see the container spec).
type Format uint8

const (
	// F32 matrices keep their values in Matrix.F32.
	F32 Format = iota
	// Int8Row: Rows*Cols two's-complement bytes, one scale per row.
	Int8Row
	// Int4Row: Rows*ceil(Cols/2) bytes, element 2j in the low nibble of byte j,
	// 2j+1 in the high nibble, value = (nibble-8)*scale[row].
	Int4Row
	// Int4Group: as Int4Row with one scale per (row, group of GroupSize
	// columns): scale[row*ceil(Cols/GroupSize) + col/GroupSize].
	Int4Group
)

// String names the format as the container summary prints it.
func (f Format) String() string {
	switch f {
	case F32:
		return "f32"
	case Int8Row:
		return "int8-row"
	case Int4Row:
		return "int4-row"
	case Int4Group:
		return "int4-grouped"
	}
	return fmt.Sprintf("format(%d)", uint8(f))
}

// Matrix is a weight matrix W[Rows, Cols] (PyTorch Linear convention: y = W x).
// It does not own its memory: Data, Scales and F32 may point into a larger
// buffer (a slab, a mapped file).
type Matrix struct {
	Format    Format
	Rows      int // O, outputs
	Cols      int // I, inputs
	GroupSize int // Int4Group only
	Data      []byte
	Scales    []float32
	F32       []float32
}

// RowBytes is the byte length of one packed row.
func (m *Matrix) RowBytes() int {
	switch m.Format {
	case Int8Row:
		return m.Cols
	case Int4Row, Int4Group:
		return (m.Cols + 1) / 2
	}
	return 4 * m.Cols
}

// ScalesPerRow is the number of scales one row carries.
func (m *Matrix) ScalesPerRow() int {
	switch m.Format {
	case Int8Row, Int4Row:
		return 1
	case Int4Group:
		return (m.Cols + m.GroupSize - 1) / m.GroupSize
	}
	return 0
}

// Validate checks that the slices have exactly the lengths the format needs.
func (m *Matrix) Validate() error {
	if m.Rows <= 0 || m.Cols <= 0 {
		return fmt.Errorf("kernels: matrix shape [%d, %d] is empty", m.Rows, m.Cols)
	}
	switch m.Format {
	case F32:
		if len(m.F32) != m.Rows*m.Cols {
			return fmt.Errorf("kernels: f32 matrix [%d, %d] has %d values", m.Rows, m.Cols, len(m.F32))
		}
		return nil
	case Int4Group:
		if m.GroupSize <= 0 {
			return errors.New("kernels: int4-grouped matrix without a group size")
		}
	case Int8Row, Int4Row:
	default:
		return fmt.Errorf("kernels: unknown format %d", m.Format)
	}
	if want := m.Rows * m.RowBytes(); len(m.Data) != want {
		return fmt.Errorf("kernels: %s matrix [%d, %d] has %d bytes, want %d", m.Format, m.Rows, m.Cols, len(m.Data), want)
	}
	if want := m.Rows * m.ScalesPerRow(); len(m.Scales) != want {
		return fmt.Errorf("kernels: %s matrix [%d, %d] has %d scales, want %d", m.Format, m.Rows, m.Cols, len(m.Scales), want)
	}
	return nil
}

// RowRange returns the view of rows [r0, r1) as a matrix sharing m's memory.
func (m *Matrix) RowRange(r0, r1 int) *Matrix {
	v := *m
	v.Rows = r1 - r0
	if m.Format == F32 {
		v.F32 = m.F32[r0*m.Cols : r1*m.Cols]
		return &v
	}
	rb, sp := m.RowBytes(), m.ScalesPerRow()
	v.Data = m.Data[r0*rb : r1*rb]
	v.Scales = m.Scales[r0*sp : r1*sp]
	return &v
}

// DequantRow writes row r of m as float32 values into dst[:Cols].
func DequantRow(dst []float32, m *Matrix, r int) {
	dst = dst[:m.Cols]
	switch m.Format {
	case F32:
		copy(dst, m.F32[r*m.Cols:(r+1)*m.Cols])
	case Int8Row:
		s := m.Scales[r]
		row := m.Data[r*m.Cols : (r+1)*m.Cols]
		for i, b := range row {
			dst[i] = float32(int8(b)) * s
		}
	case Int4Row, Int4Group:
		rb := m.RowBytes()
		row := m.Data[r*rb : (r+1)*rb]
		sp := m.ScalesPerRow()
		scales := m.Scales[r*sp : (r+1)*sp]
		gs := m.Cols
		if m.Format == Int4Group {
			gs = m.GroupSize
		}
		for i := range dst {
			b := row[i>>1]
			nib := b & 0x0f
			if i&1 == 1 {
				nib = b >> 4
			}
			dst[i] = float32(int(nib)-8) * scales[i/gs]
		}
	}
}
