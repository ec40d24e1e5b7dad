package experts

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/native/diskio"
)

// slabAlign is the alignment and size granule of every slab: the 16 KiB
// page of Apple silicon, a multiple of diskio.DirectAlign.
const slabAlign = 16 << 10

// layout says where one routed expert's bytes are on disk and where a slab
// holds them. Read raw, each extent (the coalesced weights or the separate
// blobs, then the scales) is read with one direct read into its own region
// of the slab, which starts at an aligned offset and is
// diskio.SlabLen(Length) long, so the aligned superset read fits. Read
// packed, its one record is read at the slab offset the pack gives and
// decoded in place: the weight extents, concatenated, rebuilt at slab
// offset 0; the scales stay at the record's end.
type layout struct {
	reads  []extentRead
	mats   [3]matrixLayout // gate, up, down
	packed *packedLayout   // nil when read raw
	bytes  int64           // bytes read from disk
	need   int64           // slab bytes the regions take
}

type extentRead struct {
	file int   // index into Streamed.files
	off  int64 // first byte of the extent in the file
	n    int64 // extent length
	at   int64 // region start in the slab (aligned)
	room int64 // region length: the aligned read of [off, off+n) fits
	// sum is the CRC-32C of the extent's bytes the weights' fingerprint
	// took, when summed (container.Checksums): every read is checked
	// against it as it lands.
	sum    uint32
	summed bool
}

// packedLayout is what decoding a packed expert needs to know.
type packedLayout struct {
	path                 string // the pack file, for errors
	regionLen, scalesLen int64
	// crc is the index's CRC-32C of the expert's weights then scales,
	// which each decoded record is checked against.
	crc uint32
	// raw is the expert read from its shard: what a damaged record
	// falls back to (the slab class is sized for both).
	raw *layout
}

// matrixLayout places one matrix in the slab: its weight bytes and its
// scales (format F32 has none).
type matrixLayout struct {
	name                     string
	format                   kernels.Format
	rows, cols, groupSize    int
	weight, scales           span
	hasScales                bool
	weightDType, scalesDType string
}

// span is a byte range of a slab.
type span struct{ at, n int64 }

// newLayout lays out the expert at loc read raw; fileIndex maps a shard
// name to its index in the source's open files, and sum gives an extent's
// checksum, when it has one.
func newLayout(loc container.ExpertLocation, fileIndex map[string]int, sum func(container.Extent) (uint32, bool)) (*layout, error) {
	lo := &layout{bytes: loc.Bytes()}
	add := func(es []container.Extent) error {
		for _, e := range es {
			fi, ok := fileIndex[e.File]
			if !ok {
				return fmt.Errorf("experts: layer %d expert %d: shard %q is not open", loc.Layer, loc.Expert, e.File)
			}
			crc, summed := sum(e)
			lo.reads = append(lo.reads, extentRead{file: fi, off: e.Offset, n: e.Length, at: lo.need, room: diskio.SlabLen(e.Length), sum: crc, summed: summed})
			lo.need += diskio.SlabLen(e.Length)
		}
		return nil
	}
	if err := add(loc.Weights); err != nil {
		return nil, err
	}
	if err := add(loc.Scales); err != nil {
		return nil, err
	}
	// A tensor's bytes sit in the slab where the aligned read of its
	// extent puts them: off mod DirectAlign bytes into the extent's region.
	find := func(t container.TensorInfo, es []container.Extent, first int) (span, error) {
		for i, e := range es {
			if t.File == e.File && t.Offset >= e.Offset && t.Offset+t.Size <= e.Offset+e.Length {
				r := lo.reads[first+i]
				start, _ := diskio.AlignedSpan(r.off, r.n)
				return span{at: r.at + r.off - start + t.Offset - e.Offset, n: t.Size}, nil
			}
		}
		return span{}, fmt.Errorf("experts: tensor %q is not inside the expert's extents", t.Name)
	}
	return lo, lo.placeMatrices(loc, func(t container.TensorInfo) (span, error) { return find(t, loc.Weights, 0) },
		func(t container.TensorInfo) (span, error) { return find(t, loc.Scales, len(loc.Weights)) })
}

// newPackedLayout lays out the expert at loc read from its pack record:
// ent in the pack open as file number file.
func newPackedLayout(loc container.ExpertLocation, ent expertpack.Entry, file int, path string) (*layout, error) {
	scalesAt := ent.SlabAt + ent.Length - loc.ScaleBytes
	if ent.Length < loc.ScaleBytes {
		return nil, fmt.Errorf("experts: %s: layer %d expert %d: a record of %d bytes cannot hold %d bytes of scales: %w",
			path, loc.Layer, loc.Expert, ent.Length, loc.ScaleBytes, expertpack.ErrCorrupt)
	}
	lo := &layout{
		bytes:  ent.Length,
		need:   max(ent.PackedSlabNeed(), loc.WeightBytes),
		reads:  []extentRead{{file: file, off: ent.Offset, n: ent.Length, at: ent.SlabAt, room: ent.PackedSlabNeed() - ent.SlabAt}},
		packed: &packedLayout{path: path, regionLen: loc.WeightBytes, scalesLen: loc.ScaleBytes, crc: ent.CRC},
	}
	// The region is the weight extents concatenated; the scales, the
	// scale extents concatenated.
	find := func(es []container.Extent, base int64) func(t container.TensorInfo) (span, error) {
		return func(t container.TensorInfo) (span, error) {
			at := base
			for _, e := range es {
				if t.File == e.File && t.Offset >= e.Offset && t.Offset+t.Size <= e.Offset+e.Length {
					return span{at: at + t.Offset - e.Offset, n: t.Size}, nil
				}
				at += e.Length
			}
			return span{}, fmt.Errorf("experts: tensor %q is not inside the expert's extents", t.Name)
		}
	}
	return lo, lo.placeMatrices(loc, find(loc.Weights, 0), find(loc.Scales, scalesAt))
}

// placeMatrices fills lo.mats, finding each matrix's weight and scale
// bytes in the slab with weight and scales.
func (lo *layout) placeMatrices(loc container.ExpertLocation, weight, scales func(container.TensorInfo) (span, error)) error {
	for i, info := range []container.MatrixInfo{loc.Gate, loc.Up, loc.Down} {
		m := matrixLayout{
			name: info.Name, format: info.Format, rows: info.Rows, cols: info.Cols, groupSize: info.GroupSize,
			weightDType: info.Weight.DType,
		}
		if info.Format == kernels.F32 && info.Weight.DType != "F32" {
			return fmt.Errorf("experts: tensor %q is %s: the streamed tier takes quantized or F32 routed experts", info.Name, info.Weight.DType)
		}
		var err error
		if m.weight, err = weight(info.Weight); err != nil {
			return err
		}
		if info.Quantized() {
			m.hasScales, m.scalesDType = true, info.Scales.DType
			if m.scales, err = scales(info.Scales); err != nil {
				return err
			}
		}
		lo.mats[i] = m
	}
	return nil
}

// summed reports whether any of the layout's extents has a checksum.
func (lo *layout) summed() bool {
	for _, r := range lo.reads {
		if r.summed {
			return true
		}
	}
	return false
}

// matrices builds the expert's three matrices over a slab whose reads
// have all completed (and, packed, whose record is decoded). The matrices
// point into the slab.
func (lo *layout) matrices(slab []byte) (*Expert, error) {
	var out [3]*kernels.Matrix
	for i, ml := range lo.mats {
		m := &kernels.Matrix{Format: ml.format, Rows: ml.rows, Cols: ml.cols, GroupSize: ml.groupSize}
		w := slab[ml.weight.at : ml.weight.at+ml.weight.n : ml.weight.at+ml.weight.n]
		if ml.format == kernels.F32 {
			m.F32 = f32View(w)
		} else {
			m.Data = w
			m.Scales = f32View(slab[ml.scales.at : ml.scales.at+ml.scales.n : ml.scales.at+ml.scales.n])
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
// multiple of diskio.DirectAlign) along aligned file offsets, so that the
// reads of a few experts keep every worker busy. The first chunk starts at
// the extent's first byte and the last ends at its last byte; each lands
// in the slab where the whole aligned read would have put it.
func (lo *layout) chunks(size int64) []chunk {
	var out []chunk
	for i, r := range lo.reads {
		start, _ := diskio.AlignedSpan(r.off, r.n)
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
	packs, err := s.openPacks(c)
	if err != nil {
		return err
	}
	sums := c.Checksums()
	for name, i := range fileIndex {
		if _, stamp, ok := sums.ShardStamp(name); ok && stamp != s.files[i].Stamp() {
			s.logger().Warn("experts: a shard changed since the weights were fingerprinted; its experts are checked by its size and time only",
				"shard", name, "fingerprinted", stamp, "now", s.files[i].Stamp())
		}
	}
	sum := func(e container.Extent) (uint32, bool) {
		crc, stamp, ok := sums.Lookup(e)
		if !ok || stamp != s.files[fileIndex[e.File]].Stamp() {
			s.unchecked++
			return 0, false
		}
		return crc, true
	}
	main := &slotClass{name: mainClass}
	mtp := &slotClass{name: mtpClass}
	for i, l := range layers {
		if _, dup := s.byLayer[l]; dup {
			return fmt.Errorf("experts: layer %d listed twice", l)
		}
		lc := &layerCache{layer: l, index: i, pinned: map[int]*slot{}, lru: map[int]*slot{}, ahead: map[int]*fill{}, class: main, policy: s.opts.newPolicy()}
		if l == s.cfg.NumLayers {
			lc.class = mtp
		}
		lc.layouts = make([]*layout, s.cfg.NumRoutedExperts)
		lc.heat = make([]heat, s.cfg.NumRoutedExperts)
		for e := range lc.layouts {
			loc, err := c.Expert(l, e, s.cfg)
			if err != nil {
				return fmt.Errorf("experts: %w", err)
			}
			lo, err := newLayout(loc, fileIndex, sum)
			if err != nil {
				return err
			}
			// A slot holds the expert read raw too: a damaged record falls
			// back to the shard in the slot it was read into.
			lc.class.size = max(lc.class.size, slabSize(lo.need))
			if p := packs[loc.Weights[0].File]; p != nil {
				if ent, ok := p.index.Lookup(l, e); ok {
					raw := lo
					if lo, err = newPackedLayout(loc, ent, p.file, p.path); err != nil {
						return err
					}
					if !p.released {
						lo.packed.raw = raw // else there is no raw copy to fall back to
					}
				}
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
