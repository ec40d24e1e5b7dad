package experts

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Test hooks for the external tests.

// SetPoison makes every slab whose contents are dropped read as 0xFF.
func SetPoison(s *Streamed, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.poison = on
}

// SetFault calls f with the 1-based number of every read that succeeded;
// a non-nil error replaces the read's result.
func SetFault(s *Streamed, f func(n int64) error) {
	s.reads.Store(0)
	if f == nil {
		s.fault.Store(nil)
		return
	}
	s.fault.Store(&f)
}

// SetFootprint replaces the footprint sampler of the guard.
func SetFootprint(s *Streamed, f func() (uint64, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.footprint = f
}

// LRUContents lists the expert ids resident in layer's LRU, ascending.
func LRUContents(s *Streamed, layer int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for id, sl := range s.byLayer[layer].lru {
		if sl.state == slotReady {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// LeaseHits reports, per index of the Acquire, whether the expert was
// resident at Acquire.
func LeaseHits(l Lease) []bool {
	sl := l.(*streamLease)
	out := make([]bool, len(sl.ids))
	for i, it := range sl.hitAtAcquire {
		out[i] = it
	}
	return out
}

// CheckInvariants verifies the bookkeeping. With idle set no lease may be
// outstanding.
func CheckInvariants(s *Streamed, idle bool) error {
	if idle {
		QuiescePrefetch(s)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.violations.Load(); n > 0 {
		return fmt.Errorf("%d generation-tag violations", n)
	}
	var slab int64
	seen := map[*slot]bool{}
	visit := func(sl *slot, where string) error {
		if seen[sl] {
			return fmt.Errorf("%s: slot listed twice", where)
		}
		seen[sl] = true
		slab += int64(len(sl.slab))
		if sl.refs < 0 || (idle && sl.refs != 0) {
			return fmt.Errorf("%s: slot has %d references", where, sl.refs)
		}
		if sl.state == slotReady && sl.ex == nil {
			return fmt.Errorf("%s: ready slot without matrices", where)
		}
		if idle && sl.state == slotReading {
			return fmt.Errorf("%s: slot still reading with no lease", where)
		}
		return nil
	}
	for _, cl := range s.classes {
		if idle && len(cl.free) != cl.all {
			return fmt.Errorf("%s bank: %d of %d slots free with no lease", cl.name, len(cl.free), cl.all)
		}
		for _, sl := range cl.free {
			if err := visit(sl, cl.name+" bank"); err != nil {
				return err
			}
			if sl.state != slotEmpty || sl.refs != 0 {
				return fmt.Errorf("%s bank: free slot in state %d with %d references", cl.name, sl.state, sl.refs)
			}
		}
	}
	for _, lc := range s.layers {
		where := fmt.Sprintf("layer %d", lc.layer)
		if len(lc.slots) != lc.cap {
			return fmt.Errorf("%s: %d LRU slots, capacity %d", where, len(lc.slots), lc.cap)
		}
		for _, sl := range lc.slots {
			if err := visit(sl, where+" LRU"); err != nil {
				return err
			}
			if sl.tier != tierLRU || sl.layer != lc.layer {
				return fmt.Errorf("%s: LRU slot has tier %d layer %d", where, sl.tier, sl.layer)
			}
		}
		for id, sl := range lc.lru {
			if sl.expert != id || !slices.Contains(lc.slots, sl) {
				return fmt.Errorf("%s: LRU map entry %d points at a slot holding %d or outside the layer", where, id, sl.expert)
			}
		}
		for _, sl := range lc.spare {
			if err := visit(sl, where+" spare pinned"); err != nil {
				return err
			}
			if sl.state != slotEmpty || sl.tier != tierPinned {
				return fmt.Errorf("%s: spare pinned slot in state %d tier %d", where, sl.state, sl.tier)
			}
		}
		for id, sl := range lc.pinned {
			if err := visit(sl, where+" pinned"); err != nil {
				return err
			}
			if sl.state != slotReady || sl.expert != id {
				return fmt.Errorf("%s: pinned slot of %d in state %d holding %d", where, id, sl.state, sl.expert)
			}
		}
	}
	if !idle {
		return nil
	}
	if slab != s.slabBytes {
		return fmt.Errorf("slabs add up to %d bytes, accounted %d", slab, s.slabBytes)
	}
	return nil
}

// QuiescePrefetch cancels every read-ahead and waits until their slots
// are back.
func QuiescePrefetch(s *Streamed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelAllAheadLocked()
	for i := 0; i < 1000 && s.workingInUseLocked() > 0; i++ {
		s.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		s.mu.Lock()
	}
}

// LRUCapacity is the number of LRU slots of layer.
func LRUCapacity(s *Streamed, layer int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byLayer[layer].cap
}

// PinnedExperts lists the expert ids pinned in layer, ascending.
func PinnedExperts(s *Streamed, layer int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.byLayer[layer].pinned))
}

// AheadDone reports whether layer's read-ahead of id is done (every read
// in) and still unclaimed.
func AheadDone(s *Streamed, layer, id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.byLayer[layer].ahead[id]
	return f != nil && f.done
}
