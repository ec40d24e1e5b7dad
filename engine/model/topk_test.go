package model

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// topKBySort is the definition: sort every position by score descending,
// position ascending, keep k, return them ascending.
func topKBySort(scores []float32, k int) []int32 {
	idx := make([]int32, len(scores))
	for i := range idx {
		idx[i] = int32(i)
	}
	key := func(v float32) float32 {
		if v != v {
			return float32(math.Inf(-1))
		}
		return v
	}
	slices.SortFunc(idx, func(a, b int32) int {
		sa, sb := key(scores[a]), key(scores[b])
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return int(a - b)
	})
	out := idx[:min(k, len(idx))]
	slices.Sort(out)
	return out
}

func topKByHeap(h *topK, scores []float32, k int) []int32 {
	h.reset(k)
	for i, s := range scores {
		h.push(s, int32(i))
	}
	return h.positions(nil)
}

func TestTopKMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	h := newTopK(64)
	for _, tc := range []struct {
		name   string
		n, k   int
		levels int // distinct score values (0: continuous)
	}{
		{"k=n", 64, 64, 0}, {"k>n", 10, 64, 0}, {"one", 100, 1, 0}, {"continuous", 5000, 64, 0},
		{"many ties", 5000, 64, 3}, {"all equal", 300, 17, 1}, {"zeros and relu", 2000, 50, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for trial := range 20 {
				scores := make([]float32, tc.n)
				for i := range scores {
					if tc.levels > 0 {
						scores[i] = float32(rng.IntN(tc.levels))
					} else {
						scores[i] = float32(rng.NormFloat64())
					}
				}
				if trial%4 == 1 { // ascending scores: every candidate enters
					slices.Sort(scores)
				}
				got, want := topKByHeap(&h, scores, tc.k), topKBySort(scores, tc.k)
				if !slices.Equal(got, want) {
					t.Fatalf("trial %d: heap %v, sort %v", trial, got, want)
				}
			}
		})
	}
}

func TestTopKDoesNotAllocate(t *testing.T) {
	h := newTopK(32)
	scores := make([]float32, 4000)
	for i := range scores {
		scores[i] = float32(i % 97)
	}
	dst := make([]int32, 32)
	allocs := testing.AllocsPerRun(10, func() {
		h.reset(32)
		for i, s := range scores {
			h.push(s, int32(i))
		}
		dst = h.positions(dst)
	})
	if allocs != 0 {
		t.Errorf("a row allocates %.0f times", allocs)
	}
}

// FuzzTopK compares the heap with the sort on arbitrary float32 scores
// (NaNs, infinities, signed zeros and ties included).
func FuzzTopK(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 128, 63, 0, 0, 0, 0}, uint8(2))
	f.Add([]byte{0, 0, 192, 127, 0, 0, 128, 255, 0, 0, 0, 128, 0, 0, 0, 0}, uint8(3))
	h := newTopK(256)
	f.Fuzz(func(t *testing.T, raw []byte, k uint8) {
		scores := make([]float32, len(raw)/4)
		for i := range scores {
			scores[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		// -0 and +0 are equal scores, which tie on position like any other.
		got, want := topKByHeap(&h, scores, int(k)), topKBySort(scores, int(k))
		if !slices.Equal(got, want) {
			t.Fatalf("scores %v, k %d: heap %v, sort %v", scores, k, got, want)
		}
	})
}
