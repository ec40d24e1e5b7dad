package kernels

import "testing"

// TestRANSQuotient: the encoders' division by multiplication is exact for
// every state and frequency.
func TestRANSQuotient(t *testing.T) {
	for f := uint32(1); f <= RANSTotal; f++ {
		r := ransReciprocal(f)
		for v := uint32(0); v < 1<<16; v++ {
			if q := ransQuotient(v, r); q != v/f {
				t.Fatalf("%d / %d: got %d", v, f, q)
			}
		}
	}
}

// TestLimitRANSLoops: SPOOL_RANS_LOOP's name keeps the loops up to the one
// it names, which becomes the default; an unknown name keeps them all.
func TestLimitRANSLoops(t *testing.T) {
	loops := []RANSLoop{{name: "go"}, {name: "scalar C (cgo)"}, {name: "avx2 (cgo)"}, {name: "avx512 vbmi2 (cgo)"}}
	for _, tc := range []struct {
		name string
		want int
	}{{"", 4}, {"avx2", 3}, {"go", 1}, {"neon", 4}} {
		if got := limitRANSLoops(loops, tc.name); len(got) != tc.want {
			t.Errorf("%q: %d loops, want %d", tc.name, len(got), tc.want)
		}
	}
}
