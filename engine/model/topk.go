package model

import (
	"math"
	"slices"
)

// topK keeps the k best of a stream of (score, position) candidates whose
// positions ascend: higher score first, the lower position on a tie (the
// DSA rule). It is a binary heap whose root is the worst candidate kept,
// on storage that is reused from row to row: a row costs one comparison
// per candidate that does not enter, and k log k to sort the result.
type topK struct {
	k     int
	score []float32
	pos   []int32
}

// newTopK returns a heap with room for k candidates.
func newTopK(k int) topK {
	return topK{score: make([]float32, 0, k), pos: make([]int32, 0, k)}
}

// reset empties the heap for a stream that keeps k candidates (at most the
// capacity it was made with).
func (h *topK) reset(k int) {
	h.k = k
	h.score, h.pos = h.score[:0], h.pos[:0]
}

// rejects reports whether a candidate of score s, offered now, would not be
// kept: the heap is full and s does not beat its worst. Callers test it
// before push, which it keeps out of the scan over the context.
func (h *topK) rejects(s float32) bool { return len(h.score) == h.k && !(s > h.score[0]) }

// push offers the candidate at position p, which must be above every
// position offered since reset. NaN scores rank below every number.
func (h *topK) push(s float32, p int32) {
	if s != s {
		s = float32(math.Inf(-1))
	}
	if len(h.score) < h.k {
		h.score = append(h.score, s)
		h.pos = append(h.pos, p)
		h.up(len(h.score) - 1)
		return
	}
	// p is above every kept position, so it wins only with a higher score.
	if h.k == 0 || !(s > h.score[0]) {
		return
	}
	h.score[0], h.pos[0] = s, p
	h.down(0)
}

// positions writes the kept positions into dst in ascending order and
// returns them.
func (h *topK) positions(dst []int32) []int32 {
	dst = append(dst[:0], h.pos...)
	slices.Sort(dst)
	return dst
}

// worse reports whether entry i ranks below entry j.
func (h *topK) worse(i, j int) bool {
	return h.score[i] < h.score[j] || (h.score[i] == h.score[j] && h.pos[i] > h.pos[j])
}

func (h *topK) swap(i, j int) {
	h.score[i], h.score[j] = h.score[j], h.score[i]
	h.pos[i], h.pos[j] = h.pos[j], h.pos[i]
}

func (h *topK) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.worse(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

func (h *topK) down(i int) {
	n := len(h.score)
	for {
		worst := i
		if l := 2*i + 1; l < n && h.worse(l, worst) {
			worst = l
		}
		if r := 2*i + 2; r < n && h.worse(r, worst) {
			worst = r
		}
		if worst == i {
			return
		}
		h.swap(i, worst)
		i = worst
	}
}
