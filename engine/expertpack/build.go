package expertpack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/spoolhq/spool/engine/rans"
)

// Block sizes: whole blocks of BlockLen raw bytes, except at the end of the
// region, where blocks shrink toward tailLen by tailGrowth each, so that
// in-place decoding needs almost no room beyond the region and the scales
// (see Record.SlabAt).
const (
	BlockLen   = 256 << 10
	tailLen    = 2 << 10
	tailGrowth = 1.1
	// codedGain is the most a coded segment may keep of its raw size;
	// segments that code larger are stored raw.
	codedGain = 0.98
)

// BuildRecord packs one expert: region is its weight extents concatenated,
// segments the lengths of the pieces (one per matrix, in region order)
// that get their own table, scales its scale extents concatenated. Each
// segment is coded when that saves at least 2% (always, with forceCoded),
// else stored raw.
func BuildRecord(region []byte, segments []int64, scales []byte, forceCoded bool) ([]byte, error) {
	if len(region) == 0 || len(segments) == 0 || len(segments) > maxSegments {
		return nil, fmt.Errorf("expertpack: record of %d region bytes in %d segments", len(region), len(segments))
	}
	var sum int64
	for _, n := range segments {
		if n < 1 {
			return nil, errors.New("expertpack: empty segment")
		}
		sum += n
	}
	if sum != int64(len(region)) {
		return nil, fmt.Errorf("expertpack: segments hold %d bytes, the region %d", sum, len(region))
	}
	type codedSeg struct {
		table  rans.Table
		coded  bool
		blocks [][]byte // data per block
		raw    []int64
	}
	segs := make([]codedSeg, len(segments))
	var off int64
	nblk := 0
	for i, n := range segments {
		src := region[off : off+n]
		lens := blockLens(n, i == len(segments)-1)
		cs := codedSeg{raw: lens}
		var h [rans.Symbols]uint64
		rans.Histogram(&h, src)
		if t, err := rans.NewTable(&h); err == nil {
			est := t.Bits(&h)/8 + float64(len(lens)*rans.StateBytes)
			if forceCoded || est < codedGain*float64(n) {
				cs.table, cs.coded = t, true
			}
		}
		var p int64
		for _, bl := range lens {
			b := src[p : p+bl]
			p += bl
			if !cs.coded {
				cs.blocks = append(cs.blocks, b)
				continue
			}
			enc, err := rans.Encode(nil, b, &cs.table)
			if err != nil {
				return nil, fmt.Errorf("expertpack: %w", err)
			}
			cs.blocks = append(cs.blocks, enc)
		}
		segs[i] = cs
		nblk += len(lens)
		off += n
	}
	h := int64(recordFixed + len(segments)*segmentBytes + nblk*blockBytes + 4)
	data := roundUp(h, dataAlign)
	end := data
	for _, s := range segs {
		for _, b := range s.blocks {
			end += int64(len(b))
		}
	}
	scalesOff := roundUp(end, dataAlign)
	rec := make([]byte, scalesOff+int64(len(scales)))
	copy(rec, recordMagic)
	binary.LittleEndian.PutUint16(rec[4:], recordVersion)
	binary.LittleEndian.PutUint16(rec[6:], uint16(len(segments)))
	binary.LittleEndian.PutUint32(rec[8:], uint32(nblk))
	binary.LittleEndian.PutUint32(rec[12:], uint32(h))
	binary.LittleEndian.PutUint64(rec[16:], uint64(len(region)))
	binary.LittleEndian.PutUint64(rec[24:], uint64(scalesOff))
	binary.LittleEndian.PutUint64(rec[32:], uint64(len(scales)))
	p := int64(recordFixed)
	for i, s := range segs {
		binary.LittleEndian.PutUint64(rec[p:], uint64(segments[i]))
		codec := uint32(codecRaw)
		if s.coded {
			codec = codecRANS
		}
		binary.LittleEndian.PutUint32(rec[p+8:], codec)
		binary.LittleEndian.PutUint32(rec[p+12:], uint32(len(s.blocks)))
		copy(rec[p+16:p+segmentBytes], s.table.Freq[:])
		p += segmentBytes
	}
	d := data
	for _, s := range segs {
		for j, b := range s.blocks {
			binary.LittleEndian.PutUint32(rec[p:], uint32(s.raw[j]))
			binary.LittleEndian.PutUint32(rec[p+4:], uint32(len(b)))
			p += blockBytes
			copy(rec[d:], b)
			d += int64(len(b))
		}
	}
	binary.LittleEndian.PutUint32(rec[h-4:], crc32.Checksum(rec[:h-4], castagnoli))
	copy(rec[scalesOff:], scales)
	return rec, nil
}

// blockLens cuts a segment of n bytes into blocks: BlockLen each, the last
// one shorter; the region's last segment ends in a tail of blocks that
// shrink geometrically to tailLen.
func blockLens(n int64, last bool) []int64 {
	var tail []int64 // from the end backwards
	if last {
		size := float64(tailLen)
		left := n
		for left > 0 && size < BlockLen {
			b := min(left, roundUp(int64(size), dataAlign))
			tail = append(tail, b)
			left -= b
			size = math.Ceil(size * tailGrowth)
		}
		n = left
	}
	var out []int64
	for ; n > 0; n -= min(n, BlockLen) {
		out = append(out, min(n, BlockLen))
	}
	for i := len(tail) - 1; i >= 0; i-- {
		out = append(out, tail[i])
	}
	return out
}
