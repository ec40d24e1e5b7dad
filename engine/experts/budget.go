package experts

import (
	"fmt"
	"math"
	"slices"

	"github.com/spoolhq/spool/native/offheap"
)

// SetLRUShare sets the share, from 0 to 1, of the planned LRU slots that
// every expert layer keeps: under memory pressure the cache gives way and
// grows back when the pressure ends. Shrinking frees the slabs of the
// least recently used unleased slots at once; slots a lease holds go at
// the next forward's first Acquire (a safe point). Growing maps empty
// slots again, up to the plan. Pinned experts and the working bank stay,
// so the tokens are those of the full cache: only what is read from disk
// changes. It returns the LRU slots per layer now targeted.
func (s *Streamed) SetLRUShare(share float64) (int, error) {
	if math.IsNaN(share) || share < 0 || share > 1 {
		return 0, fmt.Errorf("experts: LRU share %v is not between 0 and 1", share)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("experts: streamed source is closed")
	}
	target := int(math.Floor(float64(s.lruPlanned) * share))
	for _, lc := range s.layers {
		lc.cap = target
		for len(lc.slots) < target {
			sl, err := s.newSlot(lc.class, tierLRU)
			if err != nil {
				return len(lc.slots), fmt.Errorf("experts: growing the LRU back: %w", err)
			}
			sl.layer = lc.layer
			lc.slots = append(lc.slots, sl)
		}
	}
	s.trimLRULocked()
	return target, nil
}

// trimLRULocked frees unleased LRU slots of every layer holding more than
// its cap, least recently used first.
func (s *Streamed) trimLRULocked() {
	for _, lc := range s.layers {
		for len(lc.slots) > lc.cap {
			sl := lc.victim()
			if sl == nil {
				break // the rest are leased: the next forward frees them
			}
			s.dropLRUSlotLocked(lc, sl)
		}
	}
}

// dropLRUSlotLocked takes an unleased slot out of a layer's LRU and frees
// its slab.
func (s *Streamed) dropLRUSlotLocked(lc *layerCache, sl *slot) {
	s.invalidate(sl)
	lc.slots = slices.DeleteFunc(lc.slots, func(x *slot) bool { return x == sl })
	s.slabBytes -= int64(len(sl.slab))
	offheap.Free(sl.slab)
	sl.slab = nil
}
