package container

import (
	"fmt"

	"github.com/spoolhq/spool/kernels"
)

// ScalesSuffix names the scale tensor of a quantized weight: W is stored as
// "<name>" (U8 bytes) and "<name>.qs" (F32 scales).
const ScalesSuffix = ".qs"

// GroupSizes are the int4 group sizes probed, in order, when a quantized
// weight carries more than one scale per row.
var GroupSizes = [...]int{16, 32, 48, 64, 96, 128, 192, 256}

// MatrixInfo is a weight matrix W[Rows, Cols] resolved from the header
// alone: its format and where its bytes are.
type MatrixInfo struct {
	Name      string
	Rows      int // O, from the config
	Cols      int // I, from the config
	Format    kernels.Format
	GroupSize int // Int4Group only
	Weight    TensorInfo
	Scales    TensorInfo // zero for F32 matrices
	Bytes     int64      // weight plus scale bytes on disk
}

// Quantized reports whether the matrix has a scale tensor.
func (m MatrixInfo) Quantized() bool { return m.Format != kernels.F32 }

// FormatName names the format, with the group size for grouped int4.
func (m MatrixInfo) FormatName() string {
	if m.Format == kernels.Int4Group {
		return fmt.Sprintf("%s/%d", m.Format, m.GroupSize)
	}
	return m.Format.String()
}

// MatrixInfo resolves the format of weight name as a [rows, cols] matrix.
// A weight with a ".qs" sibling is quantized and its format follows from
// the byte counts: rows*cols bytes with rows scales is int8-row;
// rows*ceil(cols/2) bytes is int4 with rows scales (per row) or
// rows*ceil(cols/gs) scales (grouped, gs the first of GroupSizes that
// matches). A weight without ".qs" must be a 2-D F32, BF16 or F16 tensor of
// shape [rows, cols]. Anything else is refused.
func (c *Container) MatrixInfo(name string, rows, cols int) (MatrixInfo, error) {
	m := MatrixInfo{Name: name, Rows: rows, Cols: cols}
	if rows <= 0 || cols <= 0 {
		return m, fmt.Errorf("container: tensor %q: matrix shape [%d, %d] is empty", name, rows, cols)
	}
	w, ok := c.index[name]
	if !ok {
		return m, fmt.Errorf("container: tensor %q is missing", name)
	}
	m.Weight = w
	qs, quantized := c.index[name+ScalesSuffix]
	if !quantized {
		if w.DType == "U8" || w.DType == "I8" {
			return m, fmt.Errorf("container: tensor %q in %s: %s weight without its %s scales tensor", name, w.File, w.DType, name+ScalesSuffix)
		}
		if err := checkFloat(w, int64(rows)*int64(cols)); err != nil {
			return m, err
		}
		if len(w.Shape) != 2 || w.Shape[0] != int64(rows) || w.Shape[1] != int64(cols) {
			return m, fmt.Errorf("container: tensor %q in %s: shape %v, want [%d %d]", name, w.File, w.Shape, rows, cols)
		}
		m.Format = kernels.F32
		m.Bytes = w.Size
		return m, nil
	}
	m.Scales = qs
	m.Bytes = w.Size + qs.Size
	if w.DType != "U8" && w.DType != "I8" {
		return m, fmt.Errorf("container: tensor %q in %s: dtype %s has a %s sibling, want U8 bytes", name, w.File, w.DType, ScalesSuffix)
	}
	if qs.DType != "F32" {
		return m, fmt.Errorf("container: tensor %q in %s: scales dtype %s, want F32", qs.Name, qs.File, qs.DType)
	}
	O, I := int64(rows), int64(cols)
	int8Bytes, int4Bytes := O*I, O*((I+1)/2)
	nScales := qs.Size / 4
	switch w.Size {
	case int8Bytes:
		m.Format = kernels.Int8Row
		if nScales != O {
			return m, fmt.Errorf("container: tensor %q in %s: int8-row [%d, %d] wants %d scales (%d bytes), found %d (%d bytes)",
				qs.Name, qs.File, O, I, O, 4*O, nScales, qs.Size)
		}
	case int4Bytes:
		if nScales == O {
			m.Format = kernels.Int4Row
			break
		}
		for _, gs := range GroupSizes {
			if O*((I+int64(gs)-1)/int64(gs)) == nScales {
				m.Format, m.GroupSize = kernels.Int4Group, gs
				break
			}
		}
		if m.Format != kernels.Int4Group {
			return m, fmt.Errorf("container: tensor %q in %s: int4 [%d, %d] wants %d scales per row or %d*ceil(%d/gs) for gs in %v, found %d (%d bytes)",
				qs.Name, qs.File, O, I, O, O, I, GroupSizes, nScales, qs.Size)
		}
	default:
		return m, fmt.Errorf("container: tensor %q in %s: %d bytes match no format for [%d, %d] (int8-row wants %d, int4 wants %d)",
			name, w.File, w.Size, O, I, int8Bytes, int4Bytes)
	}
	return m, nil
}

// Matrix reads weight name as a [rows, cols] matrix (see MatrixInfo for the
// format rules). The result owns freshly allocated memory.
func (c *Container) Matrix(name string, rows, cols int) (*kernels.Matrix, error) {
	info, err := c.MatrixInfo(name, rows, cols)
	if err != nil {
		return nil, err
	}
	return c.ReadMatrix(info)
}

// ReadMatrix reads the bytes of a resolved matrix (after Preload, the
// matrix is a view of the preloaded shard).
func (c *Container) ReadMatrix(info MatrixInfo) (*kernels.Matrix, error) {
	if m, ok := c.viewMatrix(info); ok {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("container: tensor %q: %w", info.Name, err)
		}
		return m, nil
	}
	return c.ReadMatrixInto(info, func(n int) []byte { return make([]byte, n) })
}

// ReadMatrixInto reads the bytes of a resolved matrix into memory from
// alloc (called for the weights, then the scales), for example an arena
// outside the Go heap. F32 weights and scales alias that memory when it is
// 4-byte aligned; other float formats are decoded into new memory.
func (c *Container) ReadMatrixInto(info MatrixInfo, alloc func(n int) []byte) (*kernels.Matrix, error) {
	raw := alloc(int(info.Weight.Size))
	if err := c.ReadExtent(info.Weight.extent(), raw); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", info.Name, err)
	}
	m := &kernels.Matrix{Format: info.Format, Rows: info.Rows, Cols: info.Cols, GroupSize: info.GroupSize}
	if info.Format == kernels.F32 {
		m.F32 = floatView(info.Weight.DType, raw)
		return m, nil
	}
	m.Data = raw
	sraw := alloc(int(info.Scales.Size))
	if err := c.ReadExtent(info.Scales.extent(), sraw); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", info.Scales.Name, err)
	}
	m.Scales = floatView("F32", sraw)
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("container: tensor %q: %w", info.Name, err)
	}
	return m, nil
}

// viewMatrix builds a matrix over preloaded shard memory.
func (c *Container) viewMatrix(info MatrixInfo) (*kernels.Matrix, bool) {
	w, ok := c.view(info.Weight.extent())
	if !ok {
		return nil, false
	}
	m := &kernels.Matrix{Format: info.Format, Rows: info.Rows, Cols: info.Cols, GroupSize: info.GroupSize}
	if info.Format == kernels.F32 {
		m.F32 = floatView(info.Weight.DType, w)
		return m, true
	}
	s, ok := c.view(info.Scales.extent())
	if !ok {
		return nil, false
	}
	m.Data = w
	m.Scales = floatView("F32", s)
	return m, true
}

// RowBytes is what one row of the matrix occupies on disk: its packed
// weights and, quantized, its scales (4 bytes each).
func (m MatrixInfo) RowBytes() int {
	k := m.kernelMatrix()
	if !m.Quantized() {
		return int(m.Weight.Size / int64(m.Rows))
	}
	return k.RowBytes() + 4*k.ScalesPerRow()
}

func (m MatrixInfo) kernelMatrix() *kernels.Matrix {
	return &kernels.Matrix{Format: m.Format, Rows: m.Rows, Cols: m.Cols, GroupSize: m.GroupSize}
}

// ReadMatrixRow reads row r of a resolved matrix into buf (RowBytes long)
// and returns it as a one-row matrix over buf: the weights first, then
// the scales. Quantized rows and F32 rows alias buf; a BF16 or F16 row is
// decoded into new memory.
func (c *Container) ReadMatrixRow(info MatrixInfo, r int, buf []byte) (*kernels.Matrix, error) {
	if r < 0 || r >= info.Rows {
		return nil, fmt.Errorf("container: tensor %q: row %d of %d", info.Name, r, info.Rows)
	}
	if len(buf) != info.RowBytes() {
		return nil, fmt.Errorf("container: tensor %q: a buffer of %d bytes for a row of %d", info.Name, len(buf), info.RowBytes())
	}
	m := info.kernelMatrix()
	m.Rows = 1
	if !info.Quantized() {
		w := info.Weight.extent()
		n := int64(len(buf))
		w.Offset, w.Length = w.Offset+int64(r)*n, n
		if err := c.ReadExtent(w, buf); err != nil {
			return nil, fmt.Errorf("tensor %q row %d: %w", info.Name, r, err)
		}
		m.F32 = floatView(info.Weight.DType, buf)
		return m, nil
	}
	rb, sb := m.RowBytes(), 4*m.ScalesPerRow()
	w, s := info.Weight.extent(), info.Scales.extent()
	w.Offset, w.Length = w.Offset+int64(r)*int64(rb), int64(rb)
	s.Offset, s.Length = s.Offset+int64(r)*int64(sb), int64(sb)
	if err := c.ReadExtent(w, buf[:rb]); err != nil {
		return nil, fmt.Errorf("tensor %q row %d: %w", info.Name, r, err)
	}
	if err := c.ReadExtent(s, buf[rb:]); err != nil {
		return nil, fmt.Errorf("tensor %q row %d: %w", info.Scales.Name, r, err)
	}
	m.Data, m.Scales = buf[:rb], floatView("F32", buf[rb:])
	return m, nil
}
