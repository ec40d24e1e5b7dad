package experts

import (
	"maps"
	"slices"
)

// Live re-pinning (StreamOptions.RepinEvery): the pinned set follows what
// the session routes to. Every expert has a session heat, bumped each
// time a forward routes to it and halved after every pass, and a recency
// (the clock of its last use). A pass runs at a safe point, every
// RepinEvery forwards: in each layer with pins, the hottest unpinned
// expert resident in the LRU trades places with the coldest pinned one
// when its score beats the cold one's by a quarter plus four uses
// (hysteresis, so that pins do not flap): the two slots swap slabs, so
// the promoted expert stays resident, the demoted one moves into the LRU,
// and nothing is read. A spare (empty) pinned slot takes the hottest LRU
// expert used at least four times since the last pass the same way, the
// LRU slot keeping the empty slab. Scores are heat<<8 | recency, recency 255 minus
// the forwards since the last use (0 past 255), as in Colibri's LFRU.

// DefaultRepinEvery is the re-pinning period the app uses (forwards):
// on glm52-mini's replayed decode traces re-pinning raised the hit rate of
// the same slab memory from 0.149 (plain LRU) to 0.179 (pins learned live
// from no history) and 0.210 (pins from a history, re-pinned).
const DefaultRepinEvery = 16

// heat is the heat and last-use forward of one expert.
type heat struct {
	count uint32
	last  int
}

// touchLocked records that a forward routed to id of lc.
func (s *Streamed) touchLocked(lc *layerCache, id int) {
	h := &lc.heat[id]
	if h.count < 1<<23 {
		h.count++
	}
	h.last = s.forwards
}

// scoreLocked is the LFRU score of id in lc.
func (s *Streamed) scoreLocked(lc *layerCache, id int) uint64 {
	h := lc.heat[id]
	recent := 0
	if age := s.forwards - h.last; age < 255 && h.count > 0 {
		recent = 255 - age
	}
	return uint64(h.count)<<8 | uint64(recent)
}

// repinLocked runs one pass (see above); it returns the swaps made.
func (s *Streamed) repinLocked() int {
	swaps := 0
	for _, lc := range s.layers {
		if len(lc.pinned) == 0 && len(lc.spare) == 0 {
			continue
		}
		cold, coldScore := -1, uint64(0)
		for _, id := range slices.Sorted(maps.Keys(lc.pinned)) {
			sl := lc.pinned[id]
			if sl.refs != 0 || sl.state != slotReady {
				continue
			}
			if sc := s.scoreLocked(lc, id); cold < 0 || sc < coldScore {
				cold, coldScore = id, sc
			}
		}
		hot, hotScore := -1, uint64(0)
		for _, id := range slices.Sorted(maps.Keys(lc.lru)) {
			sl := lc.lru[id]
			if sl.refs != 0 || sl.state != slotReady {
				continue
			}
			if sc := s.scoreLocked(lc, id); hot < 0 || sc > hotScore {
				hot, hotScore = id, sc
			}
		}
		if hot >= 0 && len(lc.spare) > 0 && hotScore >= 4<<8 {
			p, l := lc.spare[len(lc.spare)-1], lc.lru[hot]
			lc.spare = lc.spare[:len(lc.spare)-1]
			p.slab, l.slab = l.slab, p.slab
			p.ex, p.expert, p.state = l.ex, hot, slotReady
			delete(lc.lru, hot)
			lc.pinned[hot] = p
			s.invalidate(l)
			swaps++
			continue
		}
		if cold < 0 || hot < 0 || hotScore <= coldScore+coldScore/4+4<<8 {
			continue
		}
		p, l := lc.pinned[cold], lc.lru[hot]
		p.slab, l.slab = l.slab, p.slab
		p.ex, l.ex = l.ex, p.ex
		p.expert, l.expert = hot, cold
		p.gen++
		l.gen++
		delete(lc.pinned, cold)
		delete(lc.lru, hot)
		lc.pinned[hot], lc.lru[cold] = p, l
		swaps++
	}
	for _, lc := range s.layers {
		for i := range lc.heat {
			lc.heat[i].count >>= 1
		}
	}
	s.tel.repins += swaps
	return swaps
}
