package model

import (
	"iter"
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

// All yields the pairs of the set, (expert-layer row, expert) in
// ascending order, with experts per layer.
func (s *ExpertSet) All(experts int) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		if experts <= 0 {
			return
		}
		for i, w := range s.bits {
			for ; w != 0; w &= w - 1 {
				b := i*64 + bits.TrailingZeros64(w)
				if !yield(b/experts, b%experts) {
					return
				}
			}
		}
	}
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

// LastCost is what the runner's latest forward (Forward or MTPForward)
// read from the expert source's storage, as its leases reported it: the
// experts it missed and their bytes, read on demand or ahead, and nothing
// another runner's forward or an unclaimed read-ahead read meanwhile.
// Valid until its next forward.
func (r *Runner) LastCost() experts.Cost { return r.last }

// TotalCost is what every forward of the runner read from the expert
// source's storage since NewRunner (each as LastCost).
func (r *Runner) TotalCost() experts.Cost { return r.total }

// startCost begins a forward's record.
func (r *Runner) startCost() { r.last = experts.Cost{} }

// record adds a released lease's cost to the forward's.
func (r *Runner) record(l experts.Lease) {
	c := l.Cost()
	r.last.Add(c)
	r.total.Add(c)
}
