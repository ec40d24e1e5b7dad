package experts

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Acquire implements Source.
func (s *Streamed) Acquire(ctx context.Context, layer int, ids []int) (Lease, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("experts: streamed source is closed")
	}
	lc, ok := s.byLayer[layer]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("experts: layer %d has no routed experts", layer)
	}
	seen := make([]bool, len(lc.layouts))
	for _, id := range ids {
		if id < 0 || id >= len(lc.layouts) {
			s.mu.Unlock()
			return nil, fmt.Errorf("experts: layer %d has no expert %d", layer, id)
		}
		if seen[id] {
			s.mu.Unlock()
			return nil, fmt.Errorf("experts: layer %d: expert %d requested twice", layer, id)
		}
		seen[id] = true
	}
	if s.opts.Trace != nil {
		s.opts.Trace.record(layer, ids)
	}
	if layer == s.layers[0].layer {
		s.forwards++
		if s.opts.RepinEvery > 0 && s.forwards%s.opts.RepinEvery == 0 {
			s.repinLocked()
		}
		if s.opts.FootprintLimit > 0 && s.forwards%s.opts.GuardEvery == 0 {
			s.guardLocked()
		}
		s.trimLRULocked() // what SetLRUShare could not free while leased
	}
	l := s.leaseLocked(ctx, lc, ids)
	reqs := l.startLocked()
	s.mu.Unlock()
	l.submitAsync(reqs)
	return l, nil
}

// leaseLocked applies the layer's CachePolicy to one request: hits are
// leased and reported to it, the misses it admits get the LRU slots it
// picks (evicting), the others wait for working slots.
func (s *Streamed) leaseLocked(ctx context.Context, lc *layerCache, ids []int) *streamLease {
	l := &streamLease{s: s, lc: lc, ids: ids, items: make([]leaseItem, len(ids)), hitAtAcquire: make([]bool, len(ids))}
	l.ctx, l.cancel = context.WithCancel(ctx)
	nreads := 0
	var misses []int // indices into ids, ascending id
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return ids[a] - ids[b] })
	for _, i := range order {
		id := ids[i]
		it := &l.items[i]
		it.lc, it.id = lc, id
		s.usage.add(lc.layer, id)
		s.touchLocked(lc, id)
		s.tel.routed(lc.row, id)
		if sl, ok := lc.pinned[id]; ok && sl.state == slotReady {
			sl.refs++
			it.slot, it.gen, it.state = sl, sl.gen, itemReady
			l.ready = append(l.ready, i)
			l.hitAtAcquire[i] = true
			s.tel.hit(lc.row, true)
			continue
		}
		if sl, ok := lc.lru[id]; ok && sl.state == slotReady {
			sl.refs++
			lc.policy.Hit(sl)
			it.slot, it.gen, it.state = sl, sl.gen, itemReady
			l.ready = append(l.ready, i)
			l.hitAtAcquire[i] = true
			s.tel.hit(lc.row, false)
			continue
		}
		s.tel.miss(lc.row)
		misses = append(misses, i)
		nreads += lc.layouts[id].events(s.opts.ReadChunk)
	}
	l.events = make(chan readEvent, nreads)
	l.rankLocked()
	// Admit the last misses into LRU slots nobody holds.
	free := 0
	for _, sl := range lc.slots {
		if sl.refs == 0 {
			free++
		}
	}
	admit := min(lc.policy.Admit(len(misses), free), free, len(misses))
	for j, i := range misses {
		if j < len(misses)-admit {
			// Streams through the working bank: in the slot a prefetch
			// read it into, or one to come.
			if !l.adoptPrefetchLocked(i) {
				l.pending = append(l.pending, i)
			}
			continue
		}
		sl := lc.victim() // not nil: admit <= free
		s.invalidate(sl)
		id := ids[i]
		if old, ok := lc.lru[id]; ok && old != sl {
			// A slot still reading this expert for another lease: that
			// lease keeps it; this one reads its own copy.
			delete(lc.lru, id)
		}
		sl.expert, sl.state, sl.refs = id, slotReading, 1
		lc.policy.Fill(sl)
		lc.lru[id] = sl
		l.items[i].slot, l.items[i].gen, l.items[i].state = sl, sl.gen, itemQueued
		// Admitted: a prefetch of it hands its slab to the LRU slot.
		if l.adoptPrefetchLocked(i) {
			s.swapIntoLRU(&l.items[i], sl)
		}
	}
	// Read the misses most rows share first (Order's hint).
	slices.SortStableFunc(l.pending, func(a, b int) int { return l.rank[a] - l.rank[b] })
	// Read-aheads of this layer that it did not ask for were wrong.
	for _, pf := range lc.prefetched {
		s.cancelPrefetchLocked(pf)
	}
	return l
}

// swapIntoLRU moves an adopted prefetch's slab (ready, or still being
// read into) into the LRU slot sl the policy admitted its expert to; the
// working slot takes sl's slab and goes back to the bank. The reads in
// flight keep writing into the same memory, now sl's.
func (s *Streamed) swapIntoLRU(it *leaseItem, sl *slot) {
	w := it.slot
	w.slab, sl.slab = sl.slab, w.slab
	sl.ex, sl.state = w.ex, w.state
	w.ex = nil
	it.slot, it.gen = sl, sl.gen
	w.refs--
	s.releaseWorking(w)
}
