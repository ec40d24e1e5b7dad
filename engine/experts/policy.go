package experts

import "iter"

// CachePolicy decides what one layer's LRU tier keeps: which of a lease's
// misses take a slot, and which resident expert an admitted miss
// replaces. It sees slots through CacheSlot, never slabs, reads or leases:
// the streamed tier applies its answers (leaseLocked), and the tests'
// ReplayPolicy runs it on a recorded trace with no model at all, so a new policy (the
// learning policies of the research seeds) can be measured before it
// serves a token. The pinned tier in front of it is the usage history's
// and re-pinning's (pins.go, repin.go).
//
// The first implementation is LRUPolicy. Calls come with the streamed
// tier's lock held; a policy must not block.
type CachePolicy interface {
	// Hit records that a lease used the expert resident in s.
	Hit(s CacheSlot)
	// Admit returns how many of a lease's misses take an LRU slot when
	// free slots are held by no lease: the last ones in ascending id
	// order. The others stream through the working bank.
	Admit(misses, free int) int
	// Victim returns the slot an admitted miss takes, one of candidates
	// (the slots no lease holds, in slot order), or nil for none.
	Victim(candidates iter.Seq[CacheSlot]) CacheSlot
	// Fill records that s now holds an admitted expert.
	Fill(s CacheSlot)
}

// CacheSlot is what a CachePolicy sees of one LRU slot.
type CacheSlot interface {
	// Expert is the resident (or arriving) expert's id, -1 when empty.
	Expert() int
	// Empty reports whether the slot holds nothing.
	Empty() bool
	// Mark and SetMark are a word the policy keeps per slot (LRUPolicy's
	// recency stamp); the tier never reads it.
	Mark() uint64
	SetMark(uint64)
}

// LRUPolicy is least-recently-used replacement: every hit and fill stamps
// the slot from a clock; an admitted miss takes the first empty slot, else
// the one with the oldest stamp; every miss is admitted while free slots
// last. One LRUPolicy serves one layer.
type LRUPolicy struct {
	clock uint64
}

// Hit implements CachePolicy.
func (p *LRUPolicy) Hit(s CacheSlot) { p.stamp(s) }

// Fill implements CachePolicy.
func (p *LRUPolicy) Fill(s CacheSlot) { p.stamp(s) }

func (p *LRUPolicy) stamp(s CacheSlot) {
	p.clock++
	s.SetMark(p.clock)
}

// Admit implements CachePolicy.
func (p *LRUPolicy) Admit(misses, free int) int { return min(misses, free) }

// Victim implements CachePolicy.
func (p *LRUPolicy) Victim(candidates iter.Seq[CacheSlot]) CacheSlot {
	var best CacheSlot
	for s := range candidates {
		if s.Empty() {
			return s
		}
		if best == nil || s.Mark() < best.Mark() {
			best = s
		}
	}
	return best
}

// The streamed tier's slots are CacheSlots.

func (sl *slot) Expert() int      { return sl.expert }
func (sl *slot) Empty() bool      { return sl.state == slotEmpty }
func (sl *slot) Mark() uint64     { return sl.used }
func (sl *slot) SetMark(m uint64) { sl.used = m }

// unleased lists the layer's LRU slots no lease holds, in slot order.
func (lc *layerCache) unleased() iter.Seq[CacheSlot] {
	return func(yield func(CacheSlot) bool) {
		for _, sl := range lc.slots {
			if sl.refs == 0 && !yield(sl) {
				return
			}
		}
	}
}

// victim asks the layer's policy for the slot an admitted miss (or the
// footprint guard's shrinking) takes; nil when every slot is leased.
func (lc *layerCache) victim() *slot {
	v := lc.policy.Victim(lc.unleased())
	if v == nil {
		return nil
	}
	return v.(*slot)
}
