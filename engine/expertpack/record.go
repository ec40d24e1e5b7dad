package expertpack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/spoolhq/spool/engine/rans"
)

// A record is one routed expert, packed: the expert's weight extents
// concatenated (the region) cut into segments, one per matrix, each coded
// with its own table (or stored raw) in blocks; then the scale extents,
// raw. All integers little-endian.
//
//	0   "SPXR"
//	4   u16 version (2), u16 segments, u32 blocks, u32 header length H
//	16  u64 region length, u64 scales offset, u64 scales length
//	40  per segment: u64 length, u32 codec, u32 blocks, 16 x u8 table (the
//	    frequency of each nibble, engine/rans)
//	    per block: u32 raw length, u32 coded length
//	H-4 u32 CRC-32C of bytes [0, H-4)
//	roundUp(H, 64): the blocks' data, in order; then the scales at their
//	    offset (a multiple of 64, at or after the data's end)
//
// A block's raw bytes are its coded bytes (codec raw) or rans.Decode of
// them under the segment's table (codec rANS).

const (
	recordMagic   = "SPXR"
	recordVersion = 2
	recordFixed   = 40
	segmentBytes  = 16 + rans.Symbols
	blockBytes    = 8
	// Codecs of a segment.
	codecRaw  = 0
	codecRANS = 1
	// Limits that keep a hostile record's bookkeeping small.
	maxSegments = 64
	maxBlocks   = 1 << 20
	// MaxBlockLen bounds one block's raw length.
	MaxBlockLen = 1 << 20
	dataAlign   = 64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error for a pack file or record that is
// not what this package writes.
var ErrCorrupt = errors.New("expertpack: corrupt pack")

// ErrVersion is wrapped by the error for a pack file of another format
// version (an older Spool's): spool pack rewrites such a pack, and until
// then its experts are read from the shards.
var ErrVersion = errors.New("expertpack: pack format version")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Record is a parsed record header.
type Record struct {
	RegionLen   int64
	ScalesOff   int64
	ScalesLen   int64
	HeaderLen   int64
	DataOff     int64 // where the first block's data starts
	Segments    []Segment
	Blocks      []Block
	recordBytes int64 // the record's length in the pack
}

// Segment is one coded stretch of the region.
type Segment struct {
	Len   int64
	Coded bool // rANS; else raw
	Table rans.Table
}

// Block is one independently decodable piece of a segment.
type Block struct {
	Segment  int
	Out      int64 // offset of its raw bytes in the region
	RawLen   int64
	Data     int64 // offset of its data in the record
	CodedLen int64
}

// RecordHeaderLen reads the header length from a record's first 16 bytes.
func RecordHeaderLen(prefix []byte) (int64, error) {
	if len(prefix) < 16 {
		return 0, corrupt("record prefix of %d bytes is shorter than 16", len(prefix))
	}
	if string(prefix[:4]) != recordMagic {
		return 0, corrupt("record does not start with %q", recordMagic)
	}
	if v := binary.LittleEndian.Uint16(prefix[4:]); v != recordVersion {
		return 0, corrupt("record version %d, this reader takes %d (run spool pack again)", v, recordVersion)
	}
	nseg := int64(binary.LittleEndian.Uint16(prefix[6:]))
	nblk := int64(binary.LittleEndian.Uint32(prefix[8:]))
	h := int64(binary.LittleEndian.Uint32(prefix[12:]))
	if nseg < 1 || nseg > maxSegments || nblk < 1 || nblk > maxBlocks {
		return 0, corrupt("record has %d segments and %d blocks", nseg, nblk)
	}
	if want := recordFixed + nseg*segmentBytes + nblk*blockBytes + 4; h != want {
		return 0, corrupt("record header length %d, want %d", h, want)
	}
	return h, nil
}

// ParseRecord parses and checks the header of a record of recordBytes
// bytes from its first bytes (at least RecordHeaderLen of them).
func ParseRecord(b []byte, recordBytes int64) (*Record, error) {
	h, err := RecordHeaderLen(b)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < h || h > recordBytes {
		return nil, corrupt("record header of %d bytes does not fit (%d available, record %d)", h, len(b), recordBytes)
	}
	if got, want := crc32.Checksum(b[:h-4], castagnoli), binary.LittleEndian.Uint32(b[h-4:]); got != want {
		return nil, corrupt("record header checksum %08x, stored %08x", got, want)
	}
	nseg := int(binary.LittleEndian.Uint16(b[6:]))
	nblk := int(binary.LittleEndian.Uint32(b[8:]))
	r := &Record{
		RegionLen: int64(binary.LittleEndian.Uint64(b[16:])),
		ScalesOff: int64(binary.LittleEndian.Uint64(b[24:])),
		ScalesLen: int64(binary.LittleEndian.Uint64(b[32:])),
		HeaderLen: h, DataOff: roundUp(h, dataAlign), recordBytes: recordBytes,
	}
	if r.RegionLen < 1 || r.ScalesLen < 0 || r.ScalesOff < 0 ||
		r.ScalesOff%dataAlign != 0 || r.ScalesOff > recordBytes || r.ScalesLen > recordBytes-r.ScalesOff {
		return nil, corrupt("record region %d bytes, scales %d bytes at %d, in a record of %d", r.RegionLen, r.ScalesLen, r.ScalesOff, recordBytes)
	}
	p := int64(recordFixed)
	var region int64
	blocksLeft := nblk
	var segBlocks []int
	for i := 0; i < nseg; i++ {
		s := Segment{Len: int64(binary.LittleEndian.Uint64(b[p:]))}
		codec := binary.LittleEndian.Uint32(b[p+8:])
		n := int(binary.LittleEndian.Uint32(b[p+12:]))
		copy(s.Table.Freq[:], b[p+16:p+segmentBytes])
		p += segmentBytes
		switch codec {
		case codecRaw:
		case codecRANS:
			s.Coded = true
			if err := s.Table.Validate(); err != nil {
				return nil, corrupt("segment %d: %v", i, err)
			}
		default:
			return nil, corrupt("segment %d has codec %d", i, codec)
		}
		if s.Len < 1 || s.Len > r.RegionLen-region || n < 1 || n > blocksLeft {
			return nil, corrupt("segment %d: %d bytes in %d blocks", i, s.Len, n)
		}
		region += s.Len
		blocksLeft -= n
		r.Segments = append(r.Segments, s)
		segBlocks = append(segBlocks, n)
	}
	if region != r.RegionLen || blocksLeft != 0 {
		return nil, corrupt("segments cover %d of %d region bytes and leave %d blocks", region, r.RegionLen, blocksLeft)
	}
	data := r.DataOff
	var out int64
	r.Blocks = make([]Block, 0, nblk)
	for si, n := range segBlocks {
		s := r.Segments[si]
		var segOut int64
		for j := 0; j < n; j++ {
			bl := Block{
				Segment: si, Out: out,
				RawLen:   int64(binary.LittleEndian.Uint32(b[p:])),
				CodedLen: int64(binary.LittleEndian.Uint32(b[p+4:])),
				Data:     data,
			}
			p += blockBytes
			if bl.RawLen < 1 || bl.RawLen > MaxBlockLen || bl.RawLen > s.Len-segOut {
				return nil, corrupt("segment %d block %d: raw length %d", si, j, bl.RawLen)
			}
			if s.Coded {
				if bl.CodedLen < rans.StateBytes || bl.CodedLen > int64(rans.MaxEncodedLen(int(bl.RawLen))) {
					return nil, corrupt("segment %d block %d: coded length %d for %d bytes", si, j, bl.CodedLen, bl.RawLen)
				}
			} else if bl.CodedLen != bl.RawLen {
				return nil, corrupt("segment %d block %d: raw block of %d bytes stores %d", si, j, bl.RawLen, bl.CodedLen)
			}
			if bl.CodedLen > r.ScalesOff-data {
				return nil, corrupt("segment %d block %d: data runs past the scales at %d", si, j, r.ScalesOff)
			}
			data += bl.CodedLen
			segOut += bl.RawLen
			out += bl.RawLen
			r.Blocks = append(r.Blocks, bl)
		}
		if segOut != s.Len {
			return nil, corrupt("segment %d: blocks hold %d of %d bytes", si, segOut, s.Len)
		}
	}
	if r.ScalesOff < data || r.ScalesOff > roundUp(data, dataAlign) {
		return nil, corrupt("scales at %d, data ends at %d", r.ScalesOff, data)
	}
	if end := r.ScalesOff + r.ScalesLen; end != recordBytes {
		return nil, corrupt("record of %d bytes ends its scales at %d", recordBytes, end)
	}
	return r, nil
}

// SlabAt is the smallest slab offset, a multiple of align, at which the
// record can be read so that its blocks decode in place, in order, into
// the region at slab offset 0: every block's output ends at or before its
// own data starts.
func (r *Record) SlabAt(align int64) int64 {
	var at int64
	for _, b := range r.Blocks {
		at = max(at, b.Out+b.RawLen-b.Data)
	}
	return roundUp(at, align)
}

// Bytes is the record's length in the pack.
func (r *Record) Bytes() int64 { return r.recordBytes }

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }
