package experts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/spoolhq/spool/native/diskio"
)

// streamLease is one Acquire of a Streamed source. Its state is guarded
// by the source's mutex; read completions arrive on events, which has room
// for every read the lease can submit, so workers never block.
type streamLease struct {
	s      *Streamed
	lc     *layerCache
	ids    []int
	items  []leaseItem
	ctx    context.Context
	cancel context.CancelFunc

	ready      []int // indices ready to hand out, in order
	pending    []int // misses waiting for a working slot
	events     chan readEvent
	inflight   int // reads submitted whose event has not been handled
	given      int // experts handed out by Next
	err        error
	released   bool
	submitting sync.WaitGroup // submitAsync goroutines
	// hitAtAcquire marks the experts that were resident at Acquire.
	hitAtAcquire []bool
	// adopted cancels the reads of the prefetches this lease took over.
	adopted []context.CancelFunc
	// rank orders the reads: an item's place in the layer's Order hint
	// (items it does not name after, in id order).
	rank []int
}

type itemState uint8

const (
	itemWaiting itemState = iota // a miss without a slot yet
	itemQueued                   // reads submitted
	itemReady                    // in the ready queue
	itemGiven                    // handed out by Next
	itemDone                     // Done called (or released)
)

type leaseItem struct {
	lc        *layerCache
	id        int
	slot      *slot
	gen       uint64 // slot generation when the lease took it
	state     itemState
	readsLeft int
	failed    bool
}

type readEvent struct {
	item int
	file string
	res  diskio.ReadResult
	// unpacked marks the completion of a packed expert's decode (res.Err
	// its error); u is its state.
	unpacked bool
	u        *unpackState
}

// readTag is a read request's Tag: the item it reads, and the decode
// state of a packed one.
type readTag struct {
	item int
	u    *unpackState
}

// startLocked gives waiting misses free working slots and returns their
// read requests, to be submitted without the lock held.
func (l *streamLease) startLocked() []diskio.ReadRequest {
	var reqs []diskio.ReadRequest
	order := make([]int, len(l.items))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return l.rank[a] - l.rank[b] })
	for _, i := range order {
		if l.items[i].state == itemQueued && l.items[i].readsLeft == 0 && !l.items[i].failed {
			reqs = append(reqs, l.readsFor(i)...)
		}
	}
	reqs = append(reqs, l.pumpLocked()...)
	return reqs
}

// pumpLocked moves pending misses into free working slots.
func (l *streamLease) pumpLocked() []diskio.ReadRequest {
	var reqs []diskio.ReadRequest
	cl := l.lc.class
	// Demand reads first: read-aheads give their slots up.
	for stolen := 0; stolen < len(l.pending)-len(cl.free) && l.s.stealPrefetchLocked(cl); stolen++ {
	}
	for len(l.pending) > 0 && len(cl.free) > 0 && l.err == nil {
		i := l.pending[0]
		l.pending = l.pending[1:]
		sl := cl.free[len(cl.free)-1]
		cl.free = cl.free[:len(cl.free)-1]
		sl.layer, sl.expert, sl.state, sl.refs = l.lc.layer, l.ids[i], slotReading, 1
		it := &l.items[i]
		it.slot, it.gen, it.state = sl, sl.gen, itemQueued
		reqs = append(reqs, l.readsFor(i)...)
	}
	return reqs
}

// readsFor builds the read requests of item i into its slot and counts
// them in flight.
func (l *streamLease) readsFor(i int) []diskio.ReadRequest {
	it := &l.items[i]
	lo := it.lc.layouts[it.id]
	cs := lo.chunks(l.s.opts.ReadChunk)
	tag := readTag{item: i}
	if lo.packed != nil {
		// One more event: the decode's completion.
		tag.u = newUnpackState(lo, it.slot.slab, l.s.opts.ReadChunk, l.s.opts.DecodeLoop, l.s.files)
		it.readsLeft++
		l.inflight++
	}
	reqs := make([]diskio.ReadRequest, len(cs))
	for k, c := range cs {
		r := lo.reads[c.read]
		end := r.at + r.room
		reqs[k] = diskio.ReadRequest{File: l.s.files[r.file], Off: c.off, Len: c.n, Slab: it.slot.slab[c.at:end], Tag: tag}
	}
	it.readsLeft += len(reqs)
	l.inflight += len(reqs)
	return reqs
}

// submitAsync submits reqs from a goroutine, so that Acquire returns (and
// resident experts compute) while a full pool queue drains.
func (l *streamLease) submitAsync(reqs []diskio.ReadRequest) {
	if len(reqs) == 0 {
		return
	}
	l.submitting.Add(1)
	go func() {
		defer l.submitting.Done()
		l.submit(reqs)
	}()
}

// submit queues reads; a read the pool refuses completes at once with the
// refusal as its error.
func (l *streamLease) submit(reqs []diskio.ReadRequest) {
	for _, req := range reqs {
		tag := req.Tag.(readTag)
		i := tag.item
		deliver := func(res diskio.ReadResult) {
			l.events <- readEvent{item: i, file: req.File.Path(), res: res}
			if tag.u == nil {
				return
			}
			// Decode what landed (on this worker), then report the decode
			// once it is complete.
			if final, err := tag.u.landed(req.Off, res.Err); final {
				l.events <- readEvent{item: i, file: req.File.Path(), res: diskio.ReadResult{Tag: tag, Err: err}, unpacked: true, u: tag.u}
			}
		}
		req.Done = func(res diskio.ReadResult) {
			if fault := l.s.fault.Load(); fault != nil && res.Err == nil {
				if err := (*fault)(l.s.reads.Add(1)); err != nil {
					res.Err, res.Data = err, nil
				}
			}
			deliver(res)
		}
		if _, err := l.s.pool.Submit(l.ctx, req); err != nil {
			deliver(diskio.ReadResult{Tag: tag, Err: err})
		}
	}
}

// handle applies one read completion. With the last read of an item in,
// the item's matrices are built and it joins the ready queue.
func (l *streamLease) handle(ev readEvent) {
	l.inflight--
	it := &l.items[ev.item]
	it.readsLeft--
	switch {
	case ev.unpacked:
		l.s.tel.unpacked(it.lc.row, ev.u.out, ev.u.spent)
		if ev.res.Err != nil && !it.failed && l.err == nil {
			l.err = fmt.Errorf("experts: decoding layer %d expert %d from %s: %w", it.lc.layer, it.id, ev.file, ev.res.Err)
		}
	case it.lc != nil:
		l.s.tel.read(it.lc.row, ev.res.Bytes, ev.res.Service)
	}
	if ev.res.Err != nil {
		if !it.failed && l.err == nil {
			l.err = fmt.Errorf("experts: reading layer %d expert %d from %s: %w", it.lc.layer, it.id, ev.file, ev.res.Err)
		}
		it.failed = true
	}
	if it.readsLeft > 0 || it.failed {
		return
	}
	if it.slot.gen != it.gen {
		l.s.violations.Add(1)
		it.failed = true
		if l.err == nil {
			l.err = fmt.Errorf("experts: internal error: slot of layer %d expert %d was reused while being read", it.lc.layer, it.id)
		}
		return
	}
	lo := it.lc.layouts[it.id]
	if ev.unpacked {
		lo = l.s.unpackedLocked(it.lc, it.id, ev.u)
	}
	ex, err := lo.matrices(it.slot.slab)
	if err != nil {
		it.failed = true
		if l.err == nil {
			l.err = fmt.Errorf("experts: layer %d expert %d: %w", it.lc.layer, it.id, err)
		}
		return
	}
	it.slot.ex, it.slot.state = ex, slotReady
	it.state = itemReady
	l.ready = append(l.ready, ev.item)
}

// Next implements Lease.
func (l *streamLease) Next(ctx context.Context) (int, *Expert, error) {
	s := l.s
	for {
		s.mu.Lock()
		if l.released {
			s.mu.Unlock()
			return 0, nil, errors.New("experts: lease used after Release")
		}
		if l.err != nil {
			err := l.err
			s.mu.Unlock()
			return 0, nil, err
		}
		if len(l.ready) > 0 {
			i := l.ready[0]
			l.ready = l.ready[1:]
			it := &l.items[i]
			if it.slot.gen != it.gen || it.slot.ex == nil {
				s.violations.Add(1)
				l.err = fmt.Errorf("experts: internal error: slot of layer %d expert %d was reused while leased", it.lc.layer, it.id)
				s.mu.Unlock()
				return 0, nil, l.err
			}
			it.state = itemGiven
			l.given++
			ex := it.slot.ex
			s.mu.Unlock()
			return i, ex, nil
		}
		if l.given == len(l.items) {
			s.mu.Unlock()
			return 0, nil, io.EOF
		}
		reqs := l.pumpLocked()
		var wake chan struct{}
		if len(l.pending) > 0 && l.inflight == 0 && len(reqs) == 0 {
			// Every working slot is taken: by experts of this lease the
			// consumer has not marked Done yet, or by other leases.
			wake = s.freed
		} else if l.inflight == 0 && len(reqs) == 0 {
			s.mu.Unlock()
			return 0, nil, fmt.Errorf("experts: internal error: layer %d lease has %d experts left and nothing to wait for", l.lc.layer, len(l.items)-l.given)
		}
		s.mu.Unlock()
		l.submit(reqs)

		start := time.Now()
		select {
		case ev := <-l.events:
			s.mu.Lock()
			l.handle(ev)
			s.tel.wait(l.lc.row, time.Since(start))
			s.mu.Unlock()
		case <-wake:
			s.mu.Lock()
			s.tel.wait(l.lc.row, time.Since(start))
			s.mu.Unlock()
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
}

// Done implements Lease: a working slot goes back to the bank, an LRU or
// pinned slot loses this lease's reference.
func (l *streamLease) Done(i int) {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.released || i < 0 || i >= len(l.items) || l.items[i].state != itemGiven {
		return
	}
	l.doneLocked(i)
}

func (l *streamLease) doneLocked(i int) {
	it := &l.items[i]
	it.state = itemDone
	sl := it.slot
	if sl == nil {
		return
	}
	if sl.gen != it.gen {
		l.s.violations.Add(1)
	}
	sl.refs--
	if !it.failed && sl.state == slotReady {
		if sl.tier == tierWorking {
			l.s.releaseWorking(sl)
		}
		return
	}
	// A read that failed or never finished: the slot holds no valid expert.
	switch sl.tier {
	case tierWorking:
		l.s.releaseWorking(sl)
	case tierLRU:
		l.s.invalidate(sl)
	}
}

// Release implements Lease. It cancels reads not yet done, waits for every
// submitted read to finish (a slot is never reused while a read may still
// write into it) and gives every slot back.
func (l *streamLease) Release() {
	s := l.s
	s.mu.Lock()
	if l.released {
		s.mu.Unlock()
		return
	}
	adopted := l.adopted
	s.mu.Unlock()
	l.cancel()
	for _, cancel := range adopted {
		cancel()
	}
	for {
		s.mu.Lock()
		n := l.inflight
		s.mu.Unlock()
		if n == 0 {
			break
		}
		ev := <-l.events
		s.mu.Lock()
		l.handle(ev)
		s.mu.Unlock()
	}
	l.submitting.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range l.items {
		it := &l.items[i]
		switch it.state {
		case itemQueued, itemReady:
			it.failed = it.failed || it.state == itemQueued
			it.state = itemGiven
			l.doneLocked(i)
		case itemGiven:
			l.doneLocked(i)
		}
	}
	l.pending = nil
	l.released = true
}
