package experts

import (
	"fmt"

	"github.com/spoolhq/spool/native/offheap"
)

// Slot class names: decoder-layer experts, and the MTP layer's (int8,
// twice as wide).
const (
	mainClass = "decoder"
	mtpClass  = "MTP"
)

// slotClass is one slab size and its working bank.
type slotClass struct {
	name string
	size int64
	free []*slot // working bank slots not in use
	all  int
}

type tier uint8

const (
	tierWorking tier = iota
	tierLRU
	tierPinned
)

type slotState uint8

const (
	slotEmpty slotState = iota
	slotReading
	slotReady
)

// slot is one slab and what it holds. gen changes whenever the contents
// are invalidated, so a holder of (slot, gen) can tell its contents are
// gone.
type slot struct {
	slab   []byte
	class  *slotClass
	tier   tier
	state  slotState
	gen    uint64
	layer  int
	expert int
	ex     *Expert
	refs   int
	used   uint64
}

// allocate maps the working bank and the LRU slots. The LRU gets, per
// layer, what the cache budget leaves after the pins.
func (s *Streamed) allocate(working, k int) error {
	for _, cl := range s.classes {
		n := working
		if cl.name == mtpClass {
			n = max(1, min(working, k))
		}
		for range n {
			sl, err := s.newSlot(cl, tierWorking)
			if err != nil {
				return err
			}
			cl.free = append(cl.free, sl)
			cl.all++
		}
	}
	var row int64
	for _, lc := range s.layers {
		row += lc.class.size
	}
	lruBytes := s.opts.CacheBytes - s.pinBytesPlanned()
	per := 0
	if row > 0 && lruBytes > 0 {
		per = int(min(lruBytes/row, int64(s.cfg.NumRoutedExperts)))
	}
	s.lruPlanned = per
	for _, lc := range s.layers {
		lc.cap = per
		for range per {
			sl, err := s.newSlot(lc.class, tierLRU)
			if err != nil {
				return err
			}
			sl.layer = lc.layer
			lc.slots = append(lc.slots, sl)
		}
	}
	return nil
}

func (s *Streamed) newSlot(cl *slotClass, t tier) (*slot, error) {
	b, err := offheap.AllocAligned(int(cl.size), slabAlign)
	if err != nil {
		return nil, fmt.Errorf("experts: allocating a %s expert slab of %d bytes: %w", cl.name, cl.size, err)
	}
	s.slabBytes += cl.size
	return &slot{slab: b, class: cl, tier: t, layer: -1, expert: -1}, nil
}

// invalidate drops a slot's contents: its expert leaves the tier maps, its
// generation changes, and with poisoning on the slab is overwritten.
func (s *Streamed) invalidate(sl *slot) {
	if sl.state != slotEmpty && sl.expert >= 0 {
		lc := s.byLayer[sl.layer]
		if sl.tier == tierLRU && lc != nil && lc.lru[sl.expert] == sl {
			delete(lc.lru, sl.expert)
		}
	}
	sl.gen++
	sl.state, sl.ex, sl.expert = slotEmpty, nil, -1
	if sl.tier == tierWorking {
		sl.layer = -1
	}
	if s.poison {
		poisonSlab(sl.slab)
	}
}

// poisonSlab fills a slab with 0xFF bytes: int4/int8 weights of -1 and
// NaN scales, so a stale read shows up in the results.
func poisonSlab(b []byte) {
	for i := range b {
		b[i] = 0xFF
	}
}

// releaseWorking returns a working slot to its bank and wakes waiters.
func (s *Streamed) releaseWorking(sl *slot) {
	s.invalidate(sl)
	sl.class.free = append(sl.class.free, sl)
	close(s.freed)
	s.freed = make(chan struct{})
}
