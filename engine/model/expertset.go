package model

import (
	"math/bits"

	"github.com/spoolhq/spool/engine/experts"
)

// ExpertSet is a set of (expert layer, expert) pairs: which routed experts
// some forwards acquired. The zero value is empty and grows on Add.
type ExpertSet struct {
	bits []uint64
}

// Add records that expert e of expert-layer row r (an index into
// ExpertLayers) was acquired, with experts per layer.
func (s *ExpertSet) add(r, e, experts int) {
	b := r*experts + e
	for len(s.bits) <= b/64 {
		s.bits = append(s.bits, 0)
	}
	s.bits[b/64] |= 1 << (b % 64)
}

// Len is the number of pairs in the set.
func (s *ExpertSet) Len() int {
	n := 0
	for _, w := range s.bits {
		n += bits.OnesCount64(w)
	}
	return n
}

// PerLayer returns, for each expert-layer row (ExpertLayers order) that
// the set has room for, the distinct experts of that layer in the set,
// with experts per layer.
func (s *ExpertSet) PerLayer(experts int) []int {
	if experts <= 0 {
		return nil
	}
	rows := len(s.bits) * 64 / experts
	out := make([]int, rows)
	for r := range out {
		for e := r * experts; e < (r+1)*experts; e++ {
			out[r] += int(s.bits[e/64] >> (e % 64) & 1)
		}
	}
	return out
}

// Union adds every pair of o.
func (s *ExpertSet) Union(o *ExpertSet) {
	if o == nil {
		return
	}
	for len(s.bits) < len(o.bits) {
		s.bits = append(s.bits, 0)
	}
	for i, w := range o.bits {
		s.bits[i] |= w
	}
}

// Clear empties the set, keeping its memory.
func (s *ExpertSet) Clear() { clear(s.bits) }

// LastExperts is the set of routed experts the runner's latest forward
// acquired (valid until its next one).
func (r *Runner) LastExperts() *ExpertSet { return &r.touched }

// ExpertBytesRead is what the expert source has read from storage since it
// started: the streamed tier's bytes read, 0 for a resident source.
func (m *Model) ExpertBytesRead() int64 {
	if s, ok := m.experts.(interface{ Stats() experts.Stats }); ok {
		return s.Stats().Total.BytesRead
	}
	return 0
}
