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
