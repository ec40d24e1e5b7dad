package kvcache

import "testing"

// mtpSequence holds tokens [0, n) and MTP rows [from, end).
func mtpSequence(t *testing.T, n, from, end int) *Sequence {
	t.Helper()
	g := Geometry{Layers: 1, KVLora: 2, Rope: 1, MTP: true}
	s := New(g, 64)
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = 100 + i
	}
	if err := s.Reserve(tokens); err != nil {
		t.Fatal(err)
	}
	for range n {
		s.Layer(0).Append(make([]float32, 3), nil)
	}
	s.ResetMTP(from)
	for range end - from {
		s.MTP().Append(make([]float32, 3), nil)
	}
	return s
}

// TestRewindKeepsTheLag: rewinding to a prefix keeps the MTP row that
// consumed the token after it only when that token comes next.
func TestRewindKeepsTheLag(t *testing.T) {
	for _, tc := range []struct {
		name          string
		n, next, want int
	}{
		{"the same token next", 5, 105, 5},
		{"another token next", 5, 999, 4},
		{"rows past the prefix go", 3, 103, 3},
		{"to the start", 0, 7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mtpSequence(t, 8, 0, 7)
			s.Rewind(tc.n, tc.next)
			if s.Len() != tc.n || s.MTPEnd() != tc.want || s.MTPEnd() > s.Len() {
				t.Errorf("len %d, MTP end %d; want %d and %d", s.Len(), s.MTPEnd(), tc.n, tc.want)
			}
		})
	}
	// An MTP cache that starts past the prefix starts over at it.
	s := mtpSequence(t, 8, 6, 8)
	s.Rewind(4, 104)
	if s.mtpFrom != 4 || s.MTPEnd() != 4 {
		t.Errorf("MTP [%d, %d), want it empty from 4", s.mtpFrom, s.MTPEnd())
	}
}

func TestClearAndRollback(t *testing.T) {
	s := mtpSequence(t, 8, 2, 7)
	m := s.Mark()
	if err := s.Reserve([]int{1, 2}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s.Layer(0).Append(make([]float32, 3), nil)
		s.MTP().Append(make([]float32, 3), nil)
	}
	s.Rollback(m)
	if s.Len() != 8 || s.MTPEnd() != 7 || s.mtpFrom != 2 {
		t.Errorf("rolled back to len %d, MTP [%d, %d)", s.Len(), s.mtpFrom, s.MTPEnd())
	}
	s.Clear()
	if s.Len() != 0 || s.MTP().Len() != 0 || s.mtpFrom != 0 {
		t.Errorf("cleared: len %d, MTP rows %d from %d", s.Len(), s.MTP().Len(), s.mtpFrom)
	}
}
