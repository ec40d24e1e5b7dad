package experts

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/native"
)

// slabAlign is the alignment and size granule of every slab: the 16 KiB
// page of Apple silicon, a multiple of native.DirectAlign.
const slabAlign = 16 << 10

// layout says where one routed expert's bytes are on disk and where a slab
// holds them: each extent (the coalesced weights or the separate blobs,
// then the scales) is read with one direct read into its own region of the
// slab, which starts at an aligned offset and is native.SlabLen(Length)
// long, so the aligned superset read fits.
type layout struct {
	reads []extentRead
	mats  [3]matrixLayout // gate, up, down
	bytes int64           // weights plus scales on disk
	need  int64           // slab bytes the regions take
}

type extentRead struct {
	file int   // index into Streamed.files
	off  int64 // first byte of the extent in the file
	n    int64 // extent length
	at   int64 // region start in the slab (aligned)
}

// matrixLayout places one matrix in the extents: its weight bytes and its
// scales (format F32 has none).
type matrixLayout struct {
	name                     string
	format                   kernels.Format
	rows, cols, groupSize    int
	weight, scales           piece
	hasScales                bool
	weightDType, scalesDType string
}

// piece is a byte range inside the data of read number read.
type piece struct {
	read   int
	off, n int64
}

// newLayout lays out the expert at loc; fileIndex maps a shard name to its
// index in the source's open files.
func newLayout(loc container.ExpertLocation, fileIndex map[string]int) (*layout, error) {
	lo := &layout{bytes: loc.Bytes()}
	add := func(es []container.Extent) error {
		for _, e := range es {
			fi, ok := fileIndex[e.File]
			if !ok {
				return fmt.Errorf("experts: layer %d expert %d: shard %q is not open", loc.Layer, loc.Expert, e.File)
			}
			lo.reads = append(lo.reads, extentRead{file: fi, off: e.Offset, n: e.Length, at: lo.need})
			lo.need += native.SlabLen(e.Length)
		}
		return nil
	}
	if err := add(loc.Weights); err != nil {
		return nil, err
	}
	nw := len(lo.reads)
	if err := add(loc.Scales); err != nil {
		return nil, err
	}
	find := func(t container.TensorInfo, from, to int) (piece, error) {
		fi, ok := fileIndex[t.File]
		for i := from; ok && i < to; i++ {
			r := lo.reads[i]
			if r.file == fi && t.Offset >= r.off && t.Offset+t.Size <= r.off+r.n {
				return piece{read: i, off: t.Offset - r.off, n: t.Size}, nil
			}
		}
		return piece{}, fmt.Errorf("experts: tensor %q is not inside the expert's extents", t.Name)
	}
	for i, info := range []container.MatrixInfo{loc.Gate, loc.Up, loc.Down} {
		m := matrixLayout{
			name: info.Name, format: info.Format, rows: info.Rows, cols: info.Cols, groupSize: info.GroupSize,
			weightDType: info.Weight.DType,
		}
		if info.Format == kernels.F32 && info.Weight.DType != "F32" {
			return nil, fmt.Errorf("experts: tensor %q is %s: the streamed tier takes quantized or F32 routed experts", info.Name, info.Weight.DType)
		}
		var err error
		if m.weight, err = find(info.Weight, 0, nw); err != nil {
			return nil, err
		}
		if info.Quantized() {
			m.hasScales, m.scalesDType = true, info.Scales.DType
			if m.scales, err = find(info.Scales, nw, len(lo.reads)); err != nil {
				return nil, err
			}
		}
		lo.mats[i] = m
	}
	return lo, nil
}

// data returns the bytes of read i inside slab, as the aligned read put
// them: the region starts at r.at and the extent's first byte sits
// off mod DirectAlign bytes into it.
func (lo *layout) data(slab []byte, i int) []byte {
	r := lo.reads[i]
	start, _ := native.AlignedSpan(r.off, r.n)
	p := r.at + r.off - start
	return slab[p : p+r.n : p+r.n]
}

// matrices builds the expert's three matrices over a slab whose reads have
// all completed. The matrices point into the slab.
func (lo *layout) matrices(slab []byte) (*Expert, error) {
	var out [3]*kernels.Matrix
	for i, ml := range lo.mats {
		m := &kernels.Matrix{Format: ml.format, Rows: ml.rows, Cols: ml.cols, GroupSize: ml.groupSize}
		w := lo.data(slab, ml.weight.read)[ml.weight.off : ml.weight.off+ml.weight.n]
		if ml.format == kernels.F32 {
			m.F32 = f32View(w)
		} else {
			m.Data = w
			s := lo.data(slab, ml.scales.read)[ml.scales.off : ml.scales.off+ml.scales.n]
			m.Scales = f32View(s)
		}
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("experts: tensor %q: %w", ml.name, err)
		}
		out[i] = m
	}
	return &Expert{Gate: out[0], Up: out[1], Down: out[2]}, nil
}

// f32View returns little-endian float32 bytes as values: an alias of b
// when b is 4-byte aligned on a little-endian host, else a decoded copy.
func f32View(b []byte) []float32 {
	if len(b) >= 4 && binary.NativeEndian.Uint16([]byte{1, 0}) == 1 && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// chunk is one read request: part of an extent's aligned span.
type chunk struct {
	read   int   // index into layout.reads
	off, n int64 // file range
	at     int64 // where the aligned read starts in the slab
}

// chunks splits every extent into requests of at most size bytes (a
// multiple of native.DirectAlign) along aligned file offsets, so that the
// reads of a few experts keep every worker busy. The first chunk starts at
// the extent's first byte and the last ends at its last byte; each lands
// in the slab where the whole aligned read would have put it.
func (lo *layout) chunks(size int64) []chunk {
	var out []chunk
	for i, r := range lo.reads {
		start, _ := native.AlignedSpan(r.off, r.n)
		end := r.off + r.n
		for lo := start; lo < end; lo += size {
			c := chunk{read: i, off: max(lo, r.off), at: r.at + lo - start}
			c.n = min(lo+size, end) - c.off
			out = append(out, c)
		}
	}
	return out
}

// slabSize rounds a layout's need up to slabAlign.
func slabSize(need int64) int64 { return (need + slabAlign - 1) / slabAlign * slabAlign }

// locate lays out every expert of every layer and sizes the classes.
func (s *Streamed) locate(c *container.Container, layers []int) error {
	fileIndex := map[string]int{}
	for i, sh := range c.Shards() {
		fileIndex[sh.Name] = i
	}
	main := &slotClass{name: mainClass}
	mtp := &slotClass{name: mtpClass}
	for row, l := range layers {
		if _, dup := s.byLayer[l]; dup {
			return fmt.Errorf("experts: layer %d listed twice", l)
		}
		lc := &layerCache{layer: l, row: row, pinned: map[int]*slot{}, lru: map[int]*slot{}, class: main}
		if l == s.cfg.NumLayers {
			lc.class = mtp
		}
		lc.layouts = make([]*layout, s.cfg.NumRoutedExperts)
		for e := range lc.layouts {
			loc, err := c.Expert(l, e, s.cfg)
			if err != nil {
				return fmt.Errorf("experts: %w", err)
			}
			lo, err := newLayout(loc, fileIndex)
			if err != nil {
				return err
			}
			lc.layouts[e] = lo
			lc.class.size = max(lc.class.size, slabSize(lo.need))
		}
		s.layers = append(s.layers, lc)
		s.byLayer[l] = lc
	}
	for _, cl := range []*slotClass{main, mtp} {
		if cl.size > 0 {
			s.classes = append(s.classes, cl)
		}
	}
	return nil
}
