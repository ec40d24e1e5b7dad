package model

import (
	"math/bits"
	"sync"
)

// scratch hands out float32 buffers that are reused across forwards, so a
// forward's temporaries do not churn the garbage collector. Buffers come in
// power-of-two size classes; their contents are unspecified.
type scratch struct {
	classes [48]sync.Pool // class c holds buffers of capacity 1<<c
}

// get returns a buffer of n values (contents unspecified).
func (s *scratch) get(n int) []float32 {
	if n == 0 {
		return nil
	}
	c := bits.Len(uint(n - 1))
	if p, ok := s.classes[c].Get().(*[]float32); ok {
		return (*p)[:n]
	}
	return make([]float32, n, 1<<c)
}

// put returns a buffer from get for reuse; the caller must not touch it
// afterwards.
func (s *scratch) put(b []float32) {
	if cap(b) == 0 || cap(b)&(cap(b)-1) != 0 {
		return // not from get
	}
	c := bits.Len(uint(cap(b) - 1))
	b = b[:0]
	s.classes[c].Put(&b)
}
