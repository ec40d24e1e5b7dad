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
// read requests land. A landing never decodes on the read worker: it
// hands the blocks it made ready to decode helpers (the source's decode
// pool, one goroutine a core), so the read workers go back to reading and
// one record's blocks decode on several cores at once (expertpack.Unpacker
// orders them: a block waits for the blocks whose input its output
// overwrites). The decode's outcome is reported once, by whichever
// goroutine sees the record final: every request in, no helper running,
// decoded or failed.
type unpackState struct {
	lo     *layout
	slab   []byte
	at     int64 // slab offset of the record
	base   int64 // file offset of the record
	length int64
	chunk  int64 // read request size (a multiple of the record alignment)
	loop   rans.Loop
	// kick starts a decode helper (on the source's decode pool); helpers
	// is how many may decode this record at once.
	kick    func(func())
	helpers int
	// report hears the outcome, once, without u.mu held.
	report func(error)

	mu       sync.Mutex
	landedAt []bool // per request: its bytes are in
	prefix   int64  // record bytes landed from the start, contiguously
	reported int    // requests reported, landed or failed
	rec      *expertpack.Record
	up       *expertpack.Unpacker
	parsing  bool  // a helper parses the header
	parsedAt int64 // the prefix the last attempt to parse it had
	running  int   // helpers decoding
	// verifying: a helper checks the decoded record's checksum.
	verifying bool
	decoded   bool
	final     bool  // the outcome was reported
	err       error // a read's failure (or cancellation)
	// damaged is why the record did not decode or verify: the expert is
	// then read from its shard (readRaw) into the same slab, and fellBack
	// says the slab holds the raw layout.
	damaged  error
	fellBack bool
	// files are the source's open files, which the raw reads use.
	files []*diskio.DirectFile
	// spent is the time spent decoding (summed over the helpers), out is
	// the bytes rebuilt.
	spent time.Duration
	out   int64
}

func newUnpackState(lo *layout, slab []byte, chunk int64, loop rans.Loop, files []*diskio.DirectFile, kick func(func()), helpers int, report func(error)) *unpackState {
	r := lo.reads[0]
	n := int((r.n + chunk - 1) / chunk)
	return &unpackState{lo: lo, slab: slab, at: r.at, base: r.off, length: r.n, chunk: chunk, loop: loop, landedAt: make([]bool, n),
		files: files, kick: kick, helpers: max(helpers, 1), report: report}
}

// landed records that the request at file offset off completed (with err
// when it failed), on the read worker, and starts helpers for the blocks
// it made ready.
func (u *unpackState) landed(off int64, err error) {
	u.mu.Lock()
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
		if u.up != nil {
			u.up.Land(u.prefix)
		}
	}
	u.startLocked()
	u.finishLocked()
}

// startLocked starts as many helpers as there are blocks ready (at most
// u.helpers decoding at once); before the header is parsed, one.
func (u *unpackState) startLocked() {
	if u.err != nil || u.damaged != nil || u.decoded || u.final {
		return
	}
	want := 0
	switch {
	case u.up != nil:
		want = u.up.Ready()
		if want == 0 && u.running == 0 && u.prefix == u.length && u.up.Done() {
			want = 1 // the checksum's check is left
		}
	case !u.parsing && u.prefix >= 16 && u.prefix > u.parsedAt:
		want = 1 // the header, once more of it is in
	}
	// Each helper running takes a ready block on its next step.
	for want -= u.running; want > 0 && u.running < u.helpers; want-- {
		u.running++
		u.kick(u.help)
	}
}

// help decodes what is ready, then reports the outcome if it is final.
func (u *unpackState) help() {
	start := time.Now()
	done, err := u.decode()
	spent := time.Since(start)
	u.mu.Lock()
	u.spent += spent
	u.running--
	if err != nil && u.damaged == nil {
		u.damaged = err
	}
	if done {
		u.decoded = true
	}
	u.startLocked() // blocks landed or made ready meanwhile
	u.finishLocked()
}

// decode parses the header (once its bytes are in) and decodes ready
// blocks until none is left; with the whole record decoded and in, it
// checks the checksum.
func (u *unpackState) decode() (bool, error) {
	u.mu.Lock()
	up, prefix := u.up, u.prefix
	if up == nil && !u.parsing {
		u.parsing, u.parsedAt = true, prefix
		u.mu.Unlock()
		r, err := u.parse(prefix)
		u.mu.Lock()
		u.parsing = false
		if err != nil || r == nil {
			u.mu.Unlock()
			return false, err
		}
		if u.up, err = expertpack.NewUnpacker(r, u.slab, u.at); err != nil {
			u.mu.Unlock()
			return false, err
		}
		u.up.UseLoop(u.loop)
		u.up.Land(u.prefix)
		u.rec, up = r, u.up
		u.startLocked() // the blocks that are ready: on more cores
	}
	u.mu.Unlock()
	if up == nil {
		return false, nil
	}
	done := false
	for {
		stepped, all, err := up.Step(u.slab)
		if err != nil {
			return false, err
		}
		done = all
		if !stepped {
			break
		}
		// The block may have made others ready: on more cores.
		u.mu.Lock()
		u.startLocked()
		u.mu.Unlock()
	}
	u.mu.Lock()
	if !done || u.prefix != u.length || u.verifying || u.decoded {
		// The scales, after the blocks, are checked once they are in,
		// by one helper.
		u.mu.Unlock()
		return false, nil
	}
	u.verifying = true
	u.mu.Unlock()
	if err := up.Verify(u.slab, u.lo.packed.crc); err != nil {
		return false, err
	}
	u.mu.Lock()
	u.out = u.rec.RegionLen
	u.mu.Unlock()
	return true, nil
}

// parse parses the record header once its bytes are in (nil before).
func (u *unpackState) parse(landed int64) (*expertpack.Record, error) {
	rec := u.slab[u.at : u.at+u.length]
	h, err := expertpack.RecordHeaderLen(rec)
	if err != nil || landed < h {
		return nil, err
	}
	r, err := expertpack.ParseRecord(rec[:h], u.length)
	if err != nil {
		return nil, err
	}
	if pl := u.lo.packed; r.RegionLen != pl.regionLen || r.ScalesLen != pl.scalesLen {
		return nil, fmt.Errorf("%w: the record holds %d weight and %d scale bytes, the expert has %d and %d",
			expertpack.ErrCorrupt, r.RegionLen, r.ScalesLen, pl.regionLen, pl.scalesLen)
	}
	return r, nil
}

// finishLocked reports the outcome once it is final, and unlocks u.mu.
// Not final while a helper decodes: after a failure the slot goes back
// once the outcome is reported, and a decode still writing into it would
// corrupt the next expert read there; the helper reports when it stops.
func (u *unpackState) finishLocked() {
	if u.final || u.running > 0 || u.parsing || u.reported < len(u.landedAt) || (u.err == nil && u.damaged == nil && !u.decoded) {
		u.mu.Unlock()
		return
	}
	u.final = true
	switch {
	case u.err != nil:
		// A read failed or was cancelled: that is the error, whatever
		// the decode made of a partial record.
	case u.damaged != nil:
		// Every read landed and the record is damaged: the expert's
		// bytes come from its shard instead, where it still has them.
		// No request of this record is left to write into the slab.
		if err := u.readRaw(); err != nil {
			u.err = fmt.Errorf("%w; reading it from the shard instead: %w", u.damaged, err)
		} else {
			u.fellBack = true
		}
	case u.prefix != u.length:
		u.err = fmt.Errorf("internal error: record decoded with %d of %d bytes landed", u.prefix, u.length)
	}
	err := u.err
	u.mu.Unlock()
	u.report(err)
}

// errNoRaw: the record is the expert's only copy (its raw bytes were
// released), so a damaged one has nothing to fall back to.
var errNoRaw = errors.New("its raw bytes were released: the pack holds its only copy")

// readRaw reads the expert from its shard into the slab, as its raw
// layout places it: what a damaged record falls back to.
func (u *unpackState) readRaw() error {
	raw := u.lo.packed.raw
	if raw == nil || u.files == nil {
		return errNoRaw
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
