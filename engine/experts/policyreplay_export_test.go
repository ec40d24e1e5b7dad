package experts

import "slices"

// simSlot is an LRU slot of ReplayPolicy: an expert id and the policy's
// mark, no slab.
type simSlot struct {
	expert int
	mark   uint64
	leased bool
}

func (s *simSlot) Expert() int      { return s.expert }
func (s *simSlot) Empty() bool      { return s.expert < 0 }
func (s *simSlot) Mark() uint64     { return s.mark }
func (s *simSlot) SetMark(m uint64) { s.mark = m }

// ReplayPolicy runs the acquisitions of a recorded trace through cache
// policies alone, as the streamed tier applies them when every lease is
// taken whole and released before the next (Streamed.Replay): per layer,
// slots(layer) LRU slots behind the pinned experts pinned(layer) (nil:
// none), and a policy from newPolicy (nil: LRUPolicy). It counts the hits
// (pinned ones too) and misses, per layer and in total; no model, no
// reads, so a policy is measured on hours of routing in a moment.
func ReplayPolicy(t *RouteTrace, slots func(layer int) int, pinned func(layer int) []int, newPolicy func() CachePolicy) (total Counters, byLayer map[int]Counters) {
	type layer struct {
		policy   CachePolicy
		slots    []*simSlot
		resident map[int]*simSlot
		pinned   map[int]bool
		c        Counters
	}
	layers := map[int]*layer{}
	get := func(l int) *layer {
		if ly, ok := layers[l]; ok {
			return ly
		}
		ly := &layer{resident: map[int]*simSlot{}, pinned: map[int]bool{}}
		if newPolicy != nil {
			ly.policy = newPolicy()
		} else {
			ly.policy = &LRUPolicy{}
		}
		for range slots(l) {
			ly.slots = append(ly.slots, &simSlot{expert: -1})
		}
		if pinned != nil {
			for _, id := range pinned(l) {
				ly.pinned[id] = true
			}
		}
		layers[l] = ly
		return ly
	}
	unleased := func(ly *layer) func(func(CacheSlot) bool) {
		return func(yield func(CacheSlot) bool) {
			for _, s := range ly.slots {
				if !s.leased && !yield(s) {
					return
				}
			}
		}
	}
	for _, st := range t.Steps {
		ly := get(st.Layer)
		ids := slices.Sorted(slices.Values(st.IDs))
		var misses []int
		for _, id := range ids {
			switch s := ly.resident[id]; {
			case ly.pinned[id]:
				ly.c.Hits++
				ly.c.PinnedHits++
			case s != nil:
				s.leased = true
				ly.policy.Hit(s)
				ly.c.Hits++
			default:
				ly.c.Misses++
				misses = append(misses, id)
			}
		}
		free := 0
		for _, s := range ly.slots {
			if !s.leased {
				free++
			}
		}
		admit := min(ly.policy.Admit(len(misses), free), free, len(misses))
		for _, id := range misses[len(misses)-admit:] {
			v := ly.policy.Victim(unleased(ly)).(*simSlot)
			if v.expert >= 0 {
				delete(ly.resident, v.expert)
			}
			v.expert, v.leased = id, true
			ly.policy.Fill(v)
			ly.resident[id] = v
		}
		for _, s := range ly.slots {
			s.leased = false
		}
	}
	byLayer = map[int]Counters{}
	for l, ly := range layers {
		byLayer[l] = ly.c
		total.Hits += ly.c.Hits
		total.PinnedHits += ly.c.PinnedHits
		total.Misses += ly.c.Misses
	}
	return total, byLayer
}
