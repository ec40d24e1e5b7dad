package expertpack

import (
	"fmt"
	"hash/crc32"

	"github.com/spoolhq/spool/engine/rans"
)

// Unpacker decodes one record in place, block by block, as its bytes
// arrive: the record is read into a slab at offset at (at least
// Record.SlabAt), and the region is rebuilt at slab offset 0. It is not
// safe for concurrent use.
type Unpacker struct {
	rec  *Record
	at   int64
	decs []*rans.Decoder // per segment; nil for raw ones
	loop rans.Loop       // the zero Loop: the fastest
	next int             // next block to decode
	crc  uint32          // CRC-32C of the region decoded so far
}

// UseLoop makes u decode with the loop l (benchmarks compare them; every
// loop decodes identically).
func (u *Unpacker) UseLoop(l rans.Loop) { u.loop = l }

// NewUnpacker prepares the in-place decode of rec read at slab offset at
// of slab.
func NewUnpacker(rec *Record, slab []byte, at int64) (*Unpacker, error) {
	if at < rec.SlabAt(1) {
		return nil, fmt.Errorf("expertpack: record read at slab offset %d would overwrite itself (needs %d)", at, rec.SlabAt(1))
	}
	if int64(len(slab)) < at+rec.recordBytes || int64(len(slab)) < rec.RegionLen {
		return nil, fmt.Errorf("expertpack: slab of %d bytes cannot hold a %d byte record at %d", len(slab), rec.recordBytes, at)
	}
	u := &Unpacker{rec: rec, at: at, decs: make([]*rans.Decoder, len(rec.Segments))}
	for i, s := range rec.Segments {
		if !s.Coded {
			continue
		}
		d, err := rans.NewDecoder(&s.Table)
		if err != nil {
			return nil, fmt.Errorf("%w: segment %d: %v", ErrCorrupt, i, err)
		}
		u.decs[i] = d
	}
	return u, nil
}

// Advance decodes, in order, every block whose data lies within the
// record's first landed bytes. It reports whether every block is decoded.
func (u *Unpacker) Advance(slab []byte, landed int64) (bool, error) {
	for ; u.next < len(u.rec.Blocks); u.next++ {
		b := u.rec.Blocks[u.next]
		if b.Data+b.CodedLen > landed {
			return false, nil
		}
		src := slab[u.at+b.Data : u.at+b.Data+b.CodedLen]
		dst := slab[b.Out : b.Out+b.RawLen]
		d := u.decs[b.Segment]
		if d == nil {
			copy(dst, src)
		} else if err := d.DecodeWith(u.loop, dst, src); err != nil {
			return false, fmt.Errorf("%w: block %d (region bytes %d..%d): %v", ErrCorrupt, u.next, b.Out, b.Out+b.RawLen, err)
		}
		// The block is hot in the cache: checksummed now, it costs
		// little next to its decode.
		u.crc = crc32.Update(u.crc, castagnoli, dst)
	}
	return true, nil
}

// Verify checks a record decoded whole (Advance reported done) against
// its entry's CRC: the CRC-32C of the rebuilt region and the scales (the
// scales are stored raw, so only this check covers them). A mismatch is an
// error wrapping ErrCorrupt.
func (u *Unpacker) Verify(slab []byte, want uint32) error {
	if u.next < len(u.rec.Blocks) {
		return fmt.Errorf("expertpack: record verified before it was decoded (%d of %d blocks)", u.next, len(u.rec.Blocks))
	}
	s := u.at + u.rec.ScalesOff
	if got := crc32.Update(u.crc, castagnoli, slab[s:s+u.rec.ScalesLen]); got != want {
		return corrupt("the expert's weights and scales have CRC-32C %08x, the index says %08x", got, want)
	}
	return nil
}

// Decode unpacks a whole record (rec, its bytes) into region and scales,
// which must have the record's lengths. It is the plain path, for
// verification and for loading experts into memory.
func Decode(region, scales, rec []byte) error {
	r, err := ParseRecord(rec, int64(len(rec)))
	if err != nil {
		return err
	}
	if int64(len(region)) != r.RegionLen || int64(len(scales)) != r.ScalesLen {
		return fmt.Errorf("expertpack: record holds %d region and %d scale bytes, buffers of %d and %d given", r.RegionLen, r.ScalesLen, len(region), len(scales))
	}
	at := r.SlabAt(1)
	slab := make([]byte, max(at+int64(len(rec)), r.RegionLen))
	copy(slab[at:], rec)
	u, err := NewUnpacker(r, slab, at)
	if err != nil {
		return err
	}
	if _, err := u.Advance(slab, int64(len(rec))); err != nil {
		return err
	}
	copy(region, slab[:r.RegionLen])
	copy(scales, rec[r.ScalesOff:r.ScalesOff+r.ScalesLen])
	return nil
}
