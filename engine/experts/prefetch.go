package experts

import (
	"context"
	"slices"

	"github.com/spoolhq/spool/native/diskio"
)

// Prefetch implements Prefetcher: it starts reading, at background
// priority, those of ids (layer's experts some Acquire will probably ask
// for soon) that are neither pinned, nor in the LRU, nor already being
// read ahead, into free working slots: fills nobody waits for yet
// (fill.go), which the Acquire of their expert claims. It keeps free what
// the Acquire about to run may need (as many as ids, less the slots its
// own read-aheads already hold), and cancels the layer's earlier
// read-aheads that ids no longer names. It returns at once.
func (s *Streamed) Prefetch(ctx context.Context, layer int, ids []int) {
	s.mu.Lock()
	lc, ok := s.byLayer[layer]
	if s.closed || !ok || !s.opts.Prefetch {
		s.mu.Unlock()
		return
	}
	for id, f := range lc.ahead {
		if !slices.Contains(ids, id) {
			s.cancelAheadLocked(f)
		}
	}
	// Keep free what the Acquire about to run (another layer's) may
	// need: about len(ids) slots, less those its own read-aheads hold.
	cl := lc.class
	held := 0
	for _, other := range s.layers {
		if other != lc && other.class == cl {
			held += len(other.ahead)
		}
	}
	reserve := max(0, len(ids)-held)
	var reqs []diskio.ReadRequest
	for _, id := range ids {
		if len(cl.free) <= reserve {
			break
		}
		if id < 0 || id >= len(lc.layouts) || lc.ahead[id] != nil || lc.lru[id] != nil || lc.pinned[id] != nil {
			continue
		}
		sl := cl.free[len(cl.free)-1]
		cl.free = cl.free[:len(cl.free)-1]
		sl.layer, sl.expert, sl.state, sl.refs = layer, id, slotReading, 1
		f, r := s.startFillLocked(ctx, lc, id, sl, nil, 0)
		lc.ahead[id] = f
		reqs = append(reqs, r...)
		s.tel.prefetched(lc.index)
	}
	if len(reqs) == 0 {
		s.mu.Unlock()
		return
	}
	s.bgSubmit.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.bgSubmit.Done()
		s.submitReads(reqs)
	}()
}

// Prefetching implements Prefetcher.
func (s *Streamed) Prefetching() bool { return s.opts.Prefetch }

// Order implements Prefetcher: the next Acquire of layer reads its
// misses in the order of ids (most wanted first), those ids does not
// name after them.
func (s *Streamed) Order(layer int, ids []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lc, ok := s.byLayer[layer]; ok && !s.closed {
		lc.order = slices.Clone(ids)
	}
}

// rankLocked sets l.rank from the layer's Order hint, which it consumes.
func (l *streamLease) rankLocked() {
	l.rank = make([]int, len(l.ids))
	pos := map[int]int{}
	for i, id := range l.lc.order {
		if _, dup := pos[id]; !dup {
			pos[id] = i
		}
	}
	l.lc.order = nil
	for i, id := range l.ids {
		if p, ok := pos[id]; ok {
			l.rank[i] = p
		} else {
			l.rank[i] = len(pos) + id
		}
	}
}
