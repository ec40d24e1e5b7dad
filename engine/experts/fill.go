package experts

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/spoolhq/spool/internal/crc32c"
	"github.com/spoolhq/spool/native/diskio"
)

// fill is one expert being read into a slot: the one way bytes get into
// a slab. A lease that misses starts one and waits for it (its owner); a
// read-ahead is a fill nobody waits for yet (owner nil), which an Acquire
// of its expert then claims, ready or still reading. Every completion of
// its reads lands in landed, on the read workers: the telemetry, the cost,
// the check of the bytes against the weights' checksums and, with the last
// one, the matrices (the slot is ready) or the failure are applied there,
// once. A packed expert's decode runs on the decode pool, which reports
// its outcome as one more completion (decoded).
//
// Guarded by the source's mutex, except u (its own lock) and what the read
// workers write before their atomic countdown (sums, reading, readFailed).
type fill struct {
	lc   *layerCache
	id   int
	lo   *layout // the layout read: the expert's when the fill started
	slot *slot
	gen  uint64       // the slot's generation the reads write under
	u    *unpackState // a packed expert's decode; nil read raw
	ctx  context.Context
	stop context.CancelFunc

	// chunks are the read requests' ranges; sums[k] is the CRC-32C of
	// chunk k's bytes, for an extent that has a checksum (nil when none
	// has, or the expert is read packed: its record has its own).
	chunks     []chunk
	sums       []uint32
	reading    atomic.Int32 // read requests not yet landed
	readFailed atomic.Bool
	// retried: the fill is a second read after a Repairer restored the
	// expert; a failure now is reported.
	retried bool

	// left counts the completions not yet in: one per read request, and
	// one for the decode of a packed expert.
	left  int
	bytes int64 // asked of the file system so far
	err   error // the first failure
	done  bool  // every completion is in

	// owner is the lease that waits for the fill, item its index there;
	// nil for a read-ahead nobody claimed.
	owner *streamLease
	item  int
	// cancelled: a read-ahead dropped (a wrong guess, or its slot was
	// needed); its slot goes back once the fill is done.
	cancelled bool
}

// startFillLocked starts reading expert id of lc into sl: for owner's item
// (ctx the owner's), or, with owner nil, ahead of any Acquire at
// background priority. It returns the read requests, to be submitted
// without the lock held (submitReads).
func (s *Streamed) startFillLocked(ctx context.Context, lc *layerCache, id int, sl *slot, owner *streamLease, item int) (*fill, []diskio.ReadRequest) {
	lo := lc.layouts[id]
	f := &fill{lc: lc, id: id, lo: lo, slot: sl, gen: sl.gen, owner: owner, item: item}
	f.ctx, f.stop = context.WithCancel(ctx)
	if lo.packed != nil {
		f.u = newUnpackState(lo, sl.slab, s.opts.ReadChunk, s.opts.DecodeLoop, s.files, s.decodeKick, s.opts.DecodeWorkers,
			func(err error) { s.decoded(f, err) })
		f.left++
	}
	cs := lo.chunks(s.opts.ReadChunk)
	f.chunks = cs
	if lo.packed == nil && lo.summed() {
		f.sums = make([]uint32, len(cs))
	}
	reqs := make([]diskio.ReadRequest, len(cs))
	for k, c := range cs {
		r := lo.reads[c.read]
		req := diskio.ReadRequest{File: s.files[r.file], Off: c.off, Len: c.n, Slab: sl.slab[c.at : r.at+r.room], Tag: f, Background: owner == nil}
		req.Done = func(res diskio.ReadResult) { s.landed(f, k, res) }
		reqs[k] = req
	}
	f.left += len(reqs)
	f.reading.Store(int32(len(reqs)))
	return f, reqs
}

// submitReads queues fills' requests; one the pool refuses completes at
// once with the refusal as its error.
func (s *Streamed) submitReads(reqs []diskio.ReadRequest) {
	for _, req := range reqs {
		f := req.Tag.(*fill)
		if _, err := s.pool.Submit(f.ctx, req); err != nil {
			req.Done(diskio.ReadResult{Tag: req.Tag, Err: err})
		}
	}
}

// landed applies the completion of f's read k (on the read worker). Off
// the source's lock, the bytes are summed (an extent with a checksum),
// the last read checks the expert's sums, and a packed expert decodes
// what landed; then the read is counted and, with the fill's last
// completion, the fill finished.
func (s *Streamed) landed(f *fill, k int, res diskio.ReadResult) {
	if fault := s.fault.Load(); fault != nil && res.Err == nil {
		if err := (*fault)(s.reads.Add(1)); err != nil {
			res.Err, res.Data = err, nil
		}
	}
	c := f.chunks[k]
	file := f.lo.reads[c.read].file
	if res.Err != nil {
		f.readFailed.Store(true)
	} else if f.sums != nil && f.lo.reads[c.read].summed {
		f.sums[k] = crc32c.Checksum(res.Data)
	}
	var verr error
	if f.reading.Add(-1) == 0 && f.u == nil && !f.readFailed.Load() {
		verr = s.verify(f)
	}
	if f.u != nil {
		// Decoded on the decode pool, which reports the outcome (decoded).
		f.u.landed(c.off, res.Err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f.left--
	f.bytes += res.Bytes
	s.tel.read(f.lc.index, res.Bytes, res.Service)
	if res.Err != nil {
		s.failFillLocked(f, s.readError(f, file, "reading", res.Err))
	}
	if verr != nil {
		s.failFillLocked(f, verr)
	}
	if f.left == 0 {
		s.finishFillLocked(f)
	}
}

// decoded applies the outcome of a packed fill's decode (on the decode
// pool, or the read worker that saw it final).
func (s *Streamed) decoded(f *fill, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.left--
	s.tel.unpacked(f.lc.index, f.u.out, f.u.spent)
	if err != nil {
		s.failFillLocked(f, s.readError(f, f.lo.reads[0].file, "decoding", err))
	}
	if f.left == 0 {
		s.finishFillLocked(f)
	}
}

// decodeKick runs a decode helper on the source's decode pool: at most
// DecodeWorkers at once over every record, tracked so that Close waits
// for them (they write into slabs).
func (s *Streamed) decodeKick(run func()) {
	s.decoding.Add(1)
	go func() {
		defer s.decoding.Done()
		s.decodeSlots <- struct{}{}
		defer func() { <-s.decodeSlots }()
		run()
	}()
}

// verify checks the bytes of a raw fill whose reads all landed: each
// extent with a checksum against it (the chunks' sums combined), each
// without against its file's stamp (a shard written in place since it was
// opened is not trusted).
func (s *Streamed) verify(f *fill) error {
	k := 0
	for ri, r := range f.lo.reads {
		var crc uint32
		for ; k < len(f.chunks) && f.chunks[k].read == ri; k++ {
			if r.summed {
				crc = crc32c.Combine(crc, f.sums[k], f.chunks[k].n)
			}
		}
		if r.summed && crc == r.sum {
			continue
		}
		changed, err := s.files[r.file].Changed()
		switch {
		case err != nil:
			return s.readError(f, r.file, "reading", err)
		case r.summed:
			return s.readError(f, r.file, "reading", &ChecksumError{Off: r.off, Len: r.n, Want: r.sum, Got: crc, Changed: changed})
		case changed:
			return s.readError(f, r.file, "reading", ErrChanged)
		}
	}
	return nil
}

// failFillLocked records f's first failure. Its owner hears of it at
// once, before the fill's other reads are in, unless a Repairer is to
// restore the expert first.
func (s *Streamed) failFillLocked(f *fill, err error) {
	if f.err != nil {
		return
	}
	f.err = err
	if re, ok := damaged(err); ok {
		s.noteDamageLocked(re)
	}
	if l := f.owner; l != nil && !s.repairableLocked(f) {
		l.items[f.item].failed = true
		l.failLocked(err)
	}
}

// repairableLocked reports whether f's failure goes to the Repairer: the
// expert's bytes are damaged, a lease waits for it, and it was not
// repaired once already.
func (s *Streamed) repairableLocked(f *fill) bool {
	_, dmg := damaged(f.err)
	return dmg && s.opts.Repairer != nil && f.owner != nil && !f.retried
}

// repairLocked hands a damaged fill to the Repairer, on a goroutine of its
// own; the owner keeps waiting. Restored, the expert is read again into
// the same slot, once; else the fill fails with the damage.
func (s *Streamed) repairLocked(f *fill, damage *ReadError) {
	s.repairs.Add(1)
	go func() {
		defer s.repairs.Done()
		rerr := s.opts.Repairer.Repair(f.ctx, damage)
		s.mu.Lock()
		if rerr == nil && f.ctx.Err() == nil && !s.closed {
			l := f.owner
			again, reqs := s.startFillLocked(l.ctx, f.lc, f.id, f.slot, l, f.item)
			again.retried, again.bytes = true, f.bytes
			l.items[f.item].f = again
			f.stop()
			s.mu.Unlock()
			s.submitReads(reqs)
			return
		}
		if rerr != nil {
			s.logger().Warn("experts: a damaged expert could not be repaired", "layer", damage.Layer, "expert", damage.Expert, "file", damage.File, "err", rerr)
		}
		f.retried = true // reported now
		s.finishFillLocked(f)
		s.mu.Unlock()
	}()
}

// finishFillLocked applies the last completion of f: the slot becomes
// ready (the expert's matrices built over it) or, failed, the owner's
// item fails; a read-ahead nobody claimed stays ready for an Acquire, or
// gives its slot back when it failed or was cancelled.
func (s *Streamed) finishFillLocked(f *fill) {
	f.done = true
	l := f.owner
	if l == nil {
		if f.cancelled || f.err != nil {
			s.dropAheadLocked(f)
			return
		}
		if err := s.readyLocked(f); err != nil {
			f.err = err
			s.dropAheadLocked(f)
		}
		return
	}
	if f.err != nil && s.repairableLocked(f) && f.ctx.Err() == nil {
		re, _ := damaged(f.err)
		s.repairLocked(f, re)
		return
	}
	f.stop()
	l.inflight--
	l.cost.add(f)
	defer l.wake()
	if f.err != nil {
		l.items[f.item].failed = true
		l.failLocked(f.err)
		return
	}
	if err := s.readyLocked(f); err != nil {
		s.failFillLocked(f, err)
		return
	}
	it := &l.items[f.item]
	it.state = itemReady
	l.ready = append(l.ready, f.item)
}

// readyLocked builds the matrices of a fill whose completions are all in:
// its slot is ready.
func (s *Streamed) readyLocked(f *fill) error {
	if f.slot.gen != f.gen {
		s.violations.Add(1)
		return fmt.Errorf("experts: internal error: slot of layer %d expert %d was reused while being read", f.lc.layer, f.id)
	}
	lo := f.lo
	if f.u != nil {
		lo = s.unpackedLocked(f.lc, f.id, f.u)
	}
	ex, err := lo.matrices(f.slot.slab)
	if err != nil {
		return fmt.Errorf("experts: layer %d expert %d: %w", f.lc.layer, f.id, err)
	}
	f.slot.ex, f.slot.state = ex, slotReady
	return nil
}

// claimLocked hands l's miss i the read-ahead of its expert, if a usable
// one exists: the item takes the fill and its slot, ready or still being
// read. It returns false when there is none (the miss starts its own).
func (l *streamLease) claimLocked(i int) bool {
	s := l.s
	it := &l.items[i]
	f := it.lc.ahead[it.id]
	if f == nil {
		return false
	}
	if f.cancelled || f.err != nil {
		s.cancelAheadLocked(f)
		return false
	}
	delete(it.lc.ahead, it.id)
	s.tel.prefetchHit(it.lc.index)
	f.owner, f.item = l, i
	it.f, it.slot, it.gen = f, f.slot, f.gen
	if !f.done {
		it.state = itemQueued
		l.inflight++
		return true
	}
	f.stop()
	l.cost.add(f)
	it.state = itemReady
	l.ready = append(l.ready, i)
	return true
}

// cancelAheadLocked drops a read-ahead nobody claimed: its queued reads
// end at once, and its slot goes back when the fill is done.
func (s *Streamed) cancelAheadLocked(f *fill) {
	if f.cancelled || f.owner != nil {
		return
	}
	f.cancelled = true
	f.stop()
	if f.lc.ahead[f.id] == f {
		delete(f.lc.ahead, f.id)
	}
	s.tel.prefetchCancelled(f.lc.index)
	if f.done {
		s.dropAheadLocked(f)
	}
}

// dropAheadLocked gives a done, unclaimed read-ahead's slot back.
func (s *Streamed) dropAheadLocked(f *fill) {
	if f.lc.ahead[f.id] == f {
		delete(f.lc.ahead, f.id)
	}
	f.stop()
	if f.slot != nil {
		f.slot.refs--
		s.releaseWorking(f.slot)
		f.slot = nil
	}
}

// stealAheadLocked cancels one unclaimed read-ahead of class cl (ready
// ones first: their slot frees at once) so that a demand read gets a
// working slot; it reports whether it found one.
func (s *Streamed) stealAheadLocked(cl *slotClass) bool {
	var reading *fill
	for _, lc := range s.layers {
		if lc.class != cl {
			continue
		}
		for _, f := range lc.ahead {
			if f.done {
				s.cancelAheadLocked(f)
				return true
			}
			reading = f
		}
	}
	if reading != nil {
		s.cancelAheadLocked(reading)
		return true
	}
	return false
}

// cancelAllAheadLocked cancels every unclaimed read-ahead.
func (s *Streamed) cancelAllAheadLocked() {
	for _, lc := range s.layers {
		for _, f := range lc.ahead {
			s.cancelAheadLocked(f)
		}
	}
}

// workingInUseLocked counts the working slots taken, by leases or
// read-aheads.
func (s *Streamed) workingInUseLocked() int {
	n := 0
	for _, cl := range s.classes {
		n += cl.all - len(cl.free)
	}
	return n
}

// swapIntoLRU moves a claimed read-ahead's slab (ready, or still being
// read into) into the LRU slot sl the policy admitted its expert to; the
// working slot takes sl's slab and goes back to the bank. The reads in
// flight keep writing into the same memory, now sl's.
func (s *Streamed) swapIntoLRU(it *leaseItem, sl *slot) {
	w := it.slot
	w.slab, sl.slab = sl.slab, w.slab
	sl.ex, sl.state = w.ex, w.state
	w.ex = nil
	it.slot, it.gen = sl, sl.gen
	if f := it.f; f != nil {
		f.slot, f.gen = sl, sl.gen
	}
	w.refs--
	s.releaseWorking(w)
}

// Cost is what a lease read from storage for its experts.
type Cost struct {
	// Experts counts the experts read from storage for the lease: its
	// misses, read on demand or ahead. A read-ahead counts for the lease
	// that claims it, one nobody claims for none (Stats counts every
	// read); an expert resident at Acquire counts for none.
	Experts int
	// Bytes is what was asked of the file system for them (the aligned
	// spans under direct I/O), failed reads included.
	Bytes int64
}

// Add adds o to c.
func (c *Cost) Add(o Cost) {
	c.Experts += o.Experts
	c.Bytes += o.Bytes
}

func (c *Cost) add(f *fill) {
	c.Experts++
	c.Bytes += f.bytes
}
