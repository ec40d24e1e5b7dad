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
// by the source's mutex. Its misses are fills (fill.go) it owns; a fill
// that finishes wakes the lease's consumer through notify.
type streamLease struct {
	s      *Streamed
	lc     *layerCache
	ids    []int
	items  []leaseItem
	ctx    context.Context
	cancel context.CancelFunc

	ready      []int // indices ready to hand out, in order
	pending    []int // misses waiting for a working slot
	notify     chan struct{}
	inflight   int // fills the lease owns that are not done
	given      int // experts handed out by Next
	err        error
	released   bool
	submitting sync.WaitGroup // submitAsync goroutines
	cost       Cost
	// hitAtAcquire marks the experts that were resident at Acquire.
	hitAtAcquire []bool
	// rank orders the reads: an item's place in the layer's Order hint
	// (items it does not name after, in id order).
	rank []int
}

type itemState uint8

const (
	itemWaiting itemState = iota // a miss without a slot yet
	itemQueued                   // its slot is being filled
	itemReady                    // in the ready queue
	itemGiven                    // handed out by Next
	itemDone                     // Done called (or released)
)

type leaseItem struct {
	lc     *layerCache
	id     int
	slot   *slot
	gen    uint64 // slot generation when the lease took it
	state  itemState
	f      *fill // the fill of a miss, once started or claimed
	failed bool
}

// newLease makes a lease of lc's experts ids (lc nil: the pins loaded at
// startup).
func (s *Streamed) newLease(ctx context.Context, lc *layerCache, ids []int) *streamLease {
	l := &streamLease{s: s, lc: lc, ids: ids, items: make([]leaseItem, len(ids)), hitAtAcquire: make([]bool, len(ids)), notify: make(chan struct{}, 1)}
	l.ctx, l.cancel = context.WithCancel(ctx)
	return l
}

// wake tells the consumer that the lease changed.
func (l *streamLease) wake() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

// failLocked records the lease's first error, which Next returns.
func (l *streamLease) failLocked(err error) {
	if l.err == nil {
		l.err = err
	}
	l.wake()
}

// startLocked gives waiting misses free working slots, then starts the
// fills of every miss that has a slot (admitted to an LRU slot, or given a
// working one) in the order of rank, so that the reads reach the pool in
// that order: a consumer that applies the experts in order (a layer-major
// forward applies them by ascending id) gets the first one first. It
// returns the read requests, to be submitted without the lock held.
func (l *streamLease) startLocked() []diskio.ReadRequest {
	l.assignLocked()
	var reqs []diskio.ReadRequest
	order := make([]int, len(l.items))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return l.rank[a] - l.rank[b] })
	for _, i := range order {
		if it := &l.items[i]; it.state == itemQueued && it.f == nil {
			reqs = append(reqs, l.fillLocked(i)...)
		}
	}
	return reqs
}

// fillLocked starts the fill of item i into its slot.
func (l *streamLease) fillLocked(i int) []diskio.ReadRequest {
	it := &l.items[i]
	f, reqs := l.s.startFillLocked(l.ctx, it.lc, it.id, it.slot, l, i)
	it.f = f
	l.inflight++
	return reqs
}

// pumpLocked moves pending misses into free working slots and starts
// their fills.
func (l *streamLease) pumpLocked() []diskio.ReadRequest {
	var reqs []diskio.ReadRequest
	for _, i := range l.assignLocked() {
		reqs = append(reqs, l.fillLocked(i)...)
	}
	return reqs
}

// assignLocked moves pending misses, in order, into free working slots
// and returns them; their fills are not started.
func (l *streamLease) assignLocked() []int {
	var assigned []int
	cl := l.lc.class
	// Demand reads first: read-aheads give their slots up.
	for stolen := 0; stolen < len(l.pending)-len(cl.free) && l.s.stealAheadLocked(cl); stolen++ {
	}
	for len(l.pending) > 0 && len(cl.free) > 0 && l.err == nil {
		i := l.pending[0]
		l.pending = l.pending[1:]
		sl := cl.free[len(cl.free)-1]
		cl.free = cl.free[:len(cl.free)-1]
		sl.layer, sl.expert, sl.state, sl.refs = l.lc.layer, l.ids[i], slotReading, 1
		it := &l.items[i]
		it.slot, it.gen, it.state = sl, sl.gen, itemQueued
		assigned = append(assigned, i)
	}
	return assigned
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
		l.s.submitReads(reqs)
	}()
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
		s.submitReads(reqs)

		start := time.Now()
		var err error
		select {
		case <-l.notify:
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			return 0, nil, err
		}
		s.mu.Lock()
		s.tel.wait(l.lc.index, time.Since(start))
		s.mu.Unlock()
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

// Release implements Lease. It cancels the fills not yet done (and the
// repairs of damaged ones), waits for every one the lease owns to finish (a slot is never reused while a read
// may still write into it) and gives every slot back.
func (l *streamLease) Release() {
	s := l.s
	s.mu.Lock()
	if l.released {
		s.mu.Unlock()
		return
	}
	for i := range l.items {
		if f := l.items[i].f; f != nil {
			f.stop() // its reads, or a Repairer working on it
		}
	}
	s.mu.Unlock()
	l.cancel()
	l.submitting.Wait()
	for {
		s.mu.Lock()
		n := l.inflight
		s.mu.Unlock()
		if n == 0 {
			break
		}
		<-l.notify
	}
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

// Cost implements Lease: what the lease's fills read, final once Release
// returned.
func (l *streamLease) Cost() Cost {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.cost
}
