package expertpack

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRCCombine: combined sums of random parts are the whole's.
func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 200; trial++ {
		b := make([]byte, rng.IntN(1<<16))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		cut := 0
		if len(b) > 0 {
			cut = rng.IntN(len(b) + 1)
		}
		a, c := crc32.Checksum(b[:cut], castagnoli), crc32.Checksum(b[cut:], castagnoli)
		if got, want := crcCombine(a, c, int64(len(b)-cut)), crc32.Checksum(b, castagnoli); got != want {
			t.Fatalf("trial %d: %08x, want %08x", trial, got, want)
		}
	}
}
