//go:build vulkan && cgo

package gpu

import (
	"fmt"
	"unsafe"

	"github.com/spoolhq/spool/kernels"
)

// arenaBytes is the size of the device buffers resident weights are
// sub-allocated from (larger matrices get their own).
const arenaBytes = 256 << 20

// weightKey identifies a matrix by the memory it views.
type weightKey struct {
	format     kernels.Format
	rows, cols int
	data       uintptr
	scales     uintptr
}

func keyOf(m *kernels.Matrix) weightKey {
	k := weightKey{format: m.Format, rows: m.Rows, cols: m.Cols}
	if m.Format == kernels.F32 {
		k.data = uintptr(unsafe.Pointer(&m.F32[0]))
	} else {
		k.data = uintptr(unsafe.Pointer(&m.Data[0]))
		k.scales = uintptr(unsafe.Pointer(&m.Scales[0]))
	}
	return k
}

// binding is a range of a buffer bound to one shader binding.
type binding struct {
	buf       *buffer
	off, size int64
}

// placed is a matrix as the gemm shader reads it: the weight bytes
// (element (0,0) at byte wOff of the data binding, wLd bytes per row) and
// the scales (first at float sOff of the scales binding).
type placed struct {
	m            *kernels.Matrix
	data, scales binding
	wOff, sOff   int64
	// transient matrices are uploaded into the operation's scratch.
	transient      bool
	dataR, scalesR region
}

// format is the gemm shader's FMT constant.
func (p *placed) format() uint32 {
	switch p.m.Format {
	case kernels.F32:
		return 0
	case kernels.Int8Row:
		return 1
	}
	return 2
}

func rowBytes(m *kernels.Matrix) int64 { return int64(m.RowBytes()) }

// groupCols is the column count sharing one scale.
func groupCols(m *kernels.Matrix) int {
	if m.Format == kernels.Int4Group {
		return m.GroupSize
	}
	return max(m.Cols, 1)
}

// matrixBytes returns the weight bytes and scale bytes of m.
func matrixBytes(m *kernels.Matrix) (data, scales []byte) {
	if m.Format == kernels.F32 {
		return bytesOf(m.F32), nil
	}
	return m.Data, bytesOf(m.Scales)
}

// place puts a matrix that Keep registers on the device.
func (d *Device) place(m *kernels.Matrix) (*placed, error) {
	data, scales := matrixBytes(m)
	if int64(len(data)) > d.maxRange || int64(len(scales)) > d.maxRange {
		return nil, fmt.Errorf("gpu: a [%d, %d] %s matrix of %d bytes exceeds the device's %d-byte binding range", m.Rows, m.Cols, m.Format, len(data), d.maxRange)
	}
	if d.info.InPlace {
		if p, ok := d.placeInPlace(m, data, scales); ok {
			return p, nil
		}
	}
	dn := roundUp(int64(len(data))+4, align)
	need := dn + roundUp(int64(len(scales))+4, align)
	buf, off, err := d.arenaAlloc(need)
	if err != nil {
		return nil, err
	}
	if err := d.upload(buf, off, data); err != nil {
		return nil, err
	}
	if err := d.upload(buf, off+dn, scales); err != nil {
		return nil, err
	}
	p := &placed{m: m, data: binding{buf, off, dn}, scales: binding{d.dummy, 0, align}}
	if len(scales) > 0 {
		p.scales = binding{buf, off + dn, need - dn}
	}
	return p, nil
}

// placeInPlace imports the host pages under the matrix.
func (d *Device) placeInPlace(m *kernels.Matrix, data, scales []byte) (*placed, bool) {
	db, doff, dres, ok := d.importRange(data)
	if !ok {
		return nil, false
	}
	p := &placed{m: m, data: binding{db, doff, roundUp(dres+int64(len(data)), 4)}, wOff: dres, scales: binding{d.dummy, 0, align}}
	if len(scales) > 0 {
		sb, soff, sres, ok := d.importRange(scales)
		if !ok || sres%4 != 0 {
			return nil, false
		}
		p.scales = binding{sb, soff, sres + int64(len(scales))}
		p.sOff = sres / 4
	}
	if m.Format == kernels.F32 && dres%4 != 0 {
		return nil, false
	}
	return p, true
}

// hostImport is host memory imported as a buffer: [start, start+size).
type hostImport struct {
	start uintptr
	buf   *buffer
}

// importRange imports the pages under b (reusing an import that covers
// them) and returns the buffer, an aligned binding offset and b's residual
// offset from it.
func (d *Device) importRange(b []byte) (buf *buffer, off, residual int64, ok bool) {
	page := uintptr(max(d.info.ImportAlignment, 4096))
	p := uintptr(unsafe.Pointer(&b[0]))
	start := p &^ (page - 1)
	end := (p + uintptr(len(b)) + 4 + page - 1) &^ (page - 1)
	// An import starting at b's first page (the same matrix placed again:
	// routed experts are placed at every forward), else any that covers b.
	if im, ok := d.importAt[start]; ok && p+uintptr(len(b))+4 <= im.start+uintptr(im.buf.size) {
		buf = im.buf
	}
	for i := 0; buf == nil && i < len(d.imports); i++ {
		if im := d.imports[i]; im.start <= p && p+uintptr(len(b))+4 <= im.start+uintptr(im.buf.size) {
			buf, start = im.buf, im.start
		}
	}
	if buf == nil {
		var err error
		// The pages start below b's first byte: unsafe.Add keeps the
		// address a pointer for the call (the driver reads, never frees).
		if buf, err = d.importHost(unsafe.Add(unsafe.Pointer(&b[0]), -int(p-start)), int64(end-start)); err != nil {
			return nil, 0, 0, false
		}
		d.imports = append(d.imports, hostImport{start, buf})
		if d.importAt == nil {
			d.importAt = map[uintptr]hostImport{}
		}
		if old, ok := d.importAt[start]; !ok || old.buf.size < buf.size {
			d.importAt[start] = hostImport{start, buf}
		}
	}
	rel := int64(p - start)
	off = rel &^ (align - 1)
	if int64(len(b))+rel-off > d.maxRange {
		return nil, 0, 0, false
	}
	return buf, off, rel - off, true
}
