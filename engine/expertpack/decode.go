package expertpack

import (
	"fmt"
	"hash/crc32"
	"sort"
	"sync"

	"github.com/spoolhq/spool/engine/rans"
)

// Unpacker decodes one record in place, as its bytes arrive: the record
// is read into a slab at offset at (at least Record.SlabAt), and the
// region is rebuilt at slab offset 0. Blocks decode in any order once
// their bytes have landed and the blocks whose bytes their output
// overwrites are decoded (a block's output overwrites only earlier
// blocks' input), so several goroutines may decode one record at once
// (Step); Advance decodes on the caller's goroutine alone.
type Unpacker struct {
	rec  *Record
	at   int64
	decs []*rans.Decoder // per segment; nil for raw ones
	loop rans.Loop       // the zero Loop: the fastest
	// first[j] is the first block whose input block j's output
	// overwrites; blocks first[j]..j-1 whose input starts before j's
	// output ends must be decoded before j.
	first, last []int

	mu     sync.Mutex
	landed int64   // record bytes in, from the start
	state  []uint8 // per block
	crcs   []uint32
	low    int // blocks before it are all decoded
	done   int
	err    error
}

// Block states.
const (
	blockPending = iota
	blockTaken
	blockDone
)

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
	n := len(rec.Blocks)
	u := &Unpacker{rec: rec, at: at, decs: make([]*rans.Decoder, len(rec.Segments)),
		first: make([]int, n), last: make([]int, n), state: make([]uint8, n), crcs: make([]uint32, n)}
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
	// The blocks whose input (at + Data, in increasing order) lies in
	// block j's output [Out, Out+RawLen): all before j (SlabAt).
	in := func(i int) (int64, int64) { b := rec.Blocks[i]; return at + b.Data, at + b.Data + b.CodedLen }
	for j, b := range rec.Blocks {
		lo := sort.Search(j, func(i int) bool { _, end := in(i); return end > b.Out })
		hi := sort.Search(j, func(i int) bool { start, _ := in(i); return start >= b.Out+b.RawLen })
		u.first[j], u.last[j] = lo, hi // blocks lo..hi-1
	}
	return u, nil
}

// Land records that the record's first n bytes are in the slab.
func (u *Unpacker) Land(n int64) {
	u.mu.Lock()
	u.landed = max(u.landed, n)
	u.mu.Unlock()
}

// Step decodes one block that is ready (its bytes landed, the blocks whose
// input it overwrites decoded), if there is one, and reports whether it
// did, and whether every block is decoded. Any number of goroutines may
// call it at once; each decodes a block of its own. After an error every
// Step returns it.
func (u *Unpacker) Step(slab []byte) (stepped, done bool, err error) {
	u.mu.Lock()
	j := u.nextLocked()
	if j < 0 || u.err != nil {
		done, err = u.done == len(u.state), u.err
		u.mu.Unlock()
		return false, done, err
	}
	u.state[j] = blockTaken
	u.mu.Unlock()

	b := u.rec.Blocks[j]
	src := slab[u.at+b.Data : u.at+b.Data+b.CodedLen]
	dst := slab[b.Out : b.Out+b.RawLen]
	var derr error
	if d := u.decs[b.Segment]; d == nil {
		copy(dst, src)
	} else if derr = d.DecodeWith(u.loop, dst, src); derr != nil {
		derr = fmt.Errorf("%w: block %d (region bytes %d..%d): %v", ErrCorrupt, j, b.Out, b.Out+b.RawLen, derr)
	}
	// The block is hot in the cache: checksummed now, it costs little
	// next to its decode.
	crc := crc32.Checksum(dst, castagnoli)

	u.mu.Lock()
	defer u.mu.Unlock()
	u.state[j], u.crcs[j] = blockDone, crc
	u.done++
	for u.low < len(u.state) && u.state[u.low] == blockDone {
		u.low++
	}
	if derr != nil && u.err == nil {
		u.err = derr
	}
	return true, u.done == len(u.state), u.err
}

// nextLocked finds the first ready block, or -1.
func (u *Unpacker) nextLocked() int {
	for j := u.low; j < len(u.state); j++ {
		b := u.rec.Blocks[j]
		if b.Data+b.CodedLen > u.landed {
			return -1 // nor any after it: their bytes come later
		}
		if u.state[j] == blockPending && u.readyLocked(j) {
			return j
		}
	}
	return -1
}

// Ready reports how many blocks could start decoding now (their bytes
// landed, not taken, the blocks they wait for decoded): the helpers worth
// starting.
func (u *Unpacker) Ready() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for j := u.low; j < len(u.state); j++ {
		b := u.rec.Blocks[j]
		if b.Data+b.CodedLen > u.landed {
			break
		}
		if u.state[j] == blockPending && u.readyLocked(j) {
			n++
		}
	}
	return n
}

func (u *Unpacker) readyLocked(j int) bool {
	for i := max(u.first[j], u.low); i < u.last[j]; i++ {
		if u.state[i] != blockDone {
			return false
		}
	}
	return true
}

// Done reports whether every block is decoded.
func (u *Unpacker) Done() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.done == len(u.state)
}

// Advance records that the record's first landed bytes are in and decodes,
// on this goroutine, every block they cover. It reports whether every
// block is decoded.
func (u *Unpacker) Advance(slab []byte, landed int64) (bool, error) {
	u.Land(landed)
	for {
		stepped, done, err := u.Step(slab)
		if err != nil || done || !stepped {
			return done, err
		}
	}
}

// Verify checks a record decoded whole (every block done) against its
// entry's CRC: the CRC-32C of the rebuilt region and the scales (the
// scales are stored raw, so only this check covers them). A mismatch is an
// error wrapping ErrCorrupt.
func (u *Unpacker) Verify(slab []byte, want uint32) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done < len(u.state) {
		return fmt.Errorf("expertpack: record verified before it was decoded (%d of %d blocks)", u.done, len(u.state))
	}
	var crc uint32
	for j, c := range u.crcs {
		crc = crcCombine(crc, c, u.rec.Blocks[j].RawLen)
	}
	s := u.at + u.rec.ScalesOff
	if got := crc32.Update(crc, castagnoli, slab[s:s+u.rec.ScalesLen]); got != want {
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
