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
// picks (evicting), the others wait for working slots. A miss whose
// expert is being read ahead claims that fill instead of starting one.
func (s *Streamed) leaseLocked(ctx context.Context, lc *layerCache, ids []int) *streamLease {
	l := s.newLease(ctx, lc, ids)
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
		s.tel.routed(lc.index, id)
		if sl, ok := lc.pinned[id]; ok && sl.state == slotReady {
			sl.refs++
			it.slot, it.gen, it.state = sl, sl.gen, itemReady
			l.ready = append(l.ready, i)
			l.hitAtAcquire[i] = true
			s.tel.hit(lc.index, true)
			continue
		}
		if sl, ok := lc.lru[id]; ok && sl.state == slotReady {
			sl.refs++
			lc.policy.Hit(sl)
			it.slot, it.gen, it.state = sl, sl.gen, itemReady
			l.ready = append(l.ready, i)
			l.hitAtAcquire[i] = true
			s.tel.hit(lc.index, false)
			continue
		}
		s.tel.miss(lc.index)
		misses = append(misses, i)
	}
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
			// Streams through the working bank: in the slot a read-ahead
			// fills, or one to come.
			if !l.claimLocked(i) {
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
		it := &l.items[i]
		it.slot, it.gen, it.state = sl, sl.gen, itemQueued
		// Admitted: a read-ahead of it hands its slab to the LRU slot.
		if l.claimLocked(i) {
			s.swapIntoLRU(it, sl)
		}
	}
	// Read the misses most rows share first (Order's hint).
	slices.SortStableFunc(l.pending, func(a, b int) int { return l.rank[a] - l.rank[b] })
	// Read-aheads of this layer that it did not ask for were wrong.
	for _, f := range lc.ahead {
		s.cancelAheadLocked(f)
	}
	return l
}
