package experts

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/rans"
	"github.com/spoolhq/spool/internal/crc32c"
	"github.com/spoolhq/spool/native/diskio"
)

// unpackState decodes one packed expert in its slab while its record's
// read requests land. Landing requests call landed on the read workers;
// whichever finds the decoder idle decodes every block the landed prefix
// covers, so decoding overlaps the rest of the read and no two goroutines
// decode one record at once.
type unpackState struct {
	lo     *layout
	slab   []byte
	at     int64 // slab offset of the record
	base   int64 // file offset of the record
	length int64
	chunk  int64 // read request size (a multiple of the record alignment)
	loop   rans.Loop

	mu       sync.Mutex
	landedAt []bool // per request: its bytes are in
	prefix   int64  // record bytes landed from the start, contiguously
	reported int    // requests reported, landed or failed
	rec      *expertpack.Record
	up       *expertpack.Unpacker
	decoding bool
	decoded  bool
	final    bool  // the completion was reported
	err      error // a read's failure (or cancellation)
	// damaged is why the record did not decode or verify: the expert is
	// then read from its shard (readRaw) into the same slab, and fellBack
	// says the slab holds the raw layout.
	damaged  error
	fellBack bool
	// files are the source's open files, which the raw reads use.
	files []*diskio.DirectFile
	// spent is the time spent decoding, out is the bytes rebuilt.
	spent time.Duration
	out   int64
	// step decodes given the bytes landed so far: advance, or a test's
	// stand-in.
	step func(landed int64) (bool, error)
}

func newUnpackState(lo *layout, slab []byte, chunk int64, loop rans.Loop, files []*diskio.DirectFile) *unpackState {
	r := lo.reads[0]
	n := int((r.n + chunk - 1) / chunk)
	u := &unpackState{lo: lo, slab: slab, at: r.at, base: r.off, length: r.n, chunk: chunk, loop: loop, landedAt: make([]bool, n), files: files}
	u.step = u.advance
	return u
}

// landed records that the request at file offset off completed (with err
// when it failed) and decodes what it can. It returns true, with the
// decode's error, exactly once: when every request has reported, no
// decode is running, and the record is decoded or has failed.
func (u *unpackState) landed(off int64, err error) (bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reported++
	if err != nil {
		if u.err == nil {
			u.err = err
		}
	} else if k := int((off - u.base) / u.chunk); k >= 0 && k < len(u.landedAt) {
		u.landedAt[k] = true
		for k := int(u.prefix / u.chunk); k < len(u.landedAt) && u.landedAt[k]; k++ {
			u.prefix = min(int64(k+1)*u.chunk, u.length)
		}
	}
	if !u.decoding {
		u.decoding = true
		for u.err == nil && u.damaged == nil && !u.decoded {
			p := u.prefix
			u.mu.Unlock()
			start := time.Now()
			done, derr := u.step(p)
			spent := time.Since(start)
			u.mu.Lock()
			u.spent += spent
			if derr != nil {
				u.damaged = derr
			}
			u.decoded = done
			if u.prefix == p {
				break
			}
		}
		u.decoding = false
	}
	// Not final while another request's goroutine decodes: after a failure
	// the slot goes back once final is reported, and a decode still
	// writing into it would corrupt the next expert read there. That
	// goroutine reports final when its decode stops.
	if u.final || u.decoding || u.reported < len(u.landedAt) || (u.err == nil && u.damaged == nil && !u.decoded) {
		return false, nil
	}
	u.final = true
	switch {
	case u.err != nil:
		// A read failed or was cancelled: that is the error, whatever
		// the decode made of a partial record.
	case u.damaged != nil:
		// Every read landed and the record is damaged: the expert's
		// bytes come from its shard instead. No request of this record
		// is left to write into the slab.
		if err := u.readRaw(); err != nil {
			u.err = fmt.Errorf("%w; reading it from the shard instead: %w", u.damaged, err)
		} else {
			u.fellBack = true
		}
	case u.prefix != u.length:
		u.err = fmt.Errorf("internal error: record decoded with %d of %d bytes landed", u.prefix, u.length)
	}
	return true, u.err
}

// readRaw reads the expert from its shard into the slab, as its raw
// layout places it: what a damaged record falls back to.
func (u *unpackState) readRaw() error {
	raw := u.lo.packed.raw
	if raw == nil || u.files == nil {
		return errors.New("no raw layout")
	}
	if slabSize(raw.need) > int64(len(u.slab)) {
		return fmt.Errorf("internal error: a slab of %d bytes cannot hold the expert read raw (%d)", len(u.slab), raw.need)
	}
	for _, r := range raw.reads {
		data, err := u.files[r.file].ReadAtAligned(u.slab[r.at:r.at+r.room], r.off, r.n)
		if err != nil {
			return err
		}
		if got := crc32c.Checksum(data); r.summed && got != r.sum {
			return &ChecksumError{Off: r.off, Len: r.n, Want: r.sum, Got: got}
		}
	}
	return nil
}

// result is the layout the slab holds once the record is final: the
// packed one decoded, or the raw one after a fallback.
func (u *unpackState) result() *layout {
	if u.fellBack {
		return u.lo.packed.raw
	}
	return u.lo
}

// advance parses the record header once its bytes are in, then decodes
// the blocks the first landed bytes cover. Only one goroutine runs it at
// a time (decoding is held).
func (u *unpackState) advance(landed int64) (bool, error) {
	rec := u.slab[u.at : u.at+u.length]
	if u.up == nil {
		if landed < 16 {
			return false, nil
		}
		h, err := expertpack.RecordHeaderLen(rec)
		if err != nil {
			return false, err
		}
		if landed < h {
			return false, nil
		}
		r, err := expertpack.ParseRecord(rec[:h], u.length)
		if err != nil {
			return false, err
		}
		if pl := u.lo.packed; r.RegionLen != pl.regionLen || r.ScalesLen != pl.scalesLen {
			return false, fmt.Errorf("%w: the record holds %d weight and %d scale bytes, the expert has %d and %d",
				expertpack.ErrCorrupt, r.RegionLen, r.ScalesLen, pl.regionLen, pl.scalesLen)
		}
		if u.up, err = expertpack.NewUnpacker(r, u.slab, u.at); err != nil {
			return false, err
		}
		u.up.UseLoop(u.loop)
		u.rec = r
	}
	done, err := u.up.Advance(u.slab, landed)
	if err != nil || !done || landed < u.length {
		// The scales, after the blocks, are checked once they are in.
		return false, err
	}
	if err := u.up.Verify(u.slab, u.lo.packed.crc); err != nil {
		return false, err
	}
	u.out = u.rec.RegionLen
	return true, nil
}
