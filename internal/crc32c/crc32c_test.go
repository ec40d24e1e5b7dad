package crc32c_test

import (
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/spoolhq/spool/internal/crc32c"
)

// TestCombine: the combined sums of every split of some buffers are the
// sum of the whole, including empty halves.
func TestCombine(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 64, 1000, 4096 + 17, 1 << 20} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*131 + i>>7)
		}
		whole := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
		if got := crc32c.Checksum(b); got != whole {
			t.Fatalf("%d bytes: Checksum %08x, hash/crc32 %08x", n, got, whole)
		}
		for _, cut := range []int{0, 1, n / 3, n / 2, n - 1, n} {
			if cut < 0 || cut > n {
				continue
			}
			a, c := crc32c.Checksum(b[:cut]), crc32c.Checksum(b[cut:])
			if got := crc32c.Combine(a, c, int64(n-cut)); got != whole {
				t.Errorf("%d bytes cut at %d: combined %08x, whole %08x", n, cut, got, whole)
			}
		}
	}
}

func ExampleCombine() {
	a, b := []byte("expert weights "), []byte("and scales")
	joined := crc32c.Combine(crc32c.Checksum(a), crc32c.Checksum(b), int64(len(b)))
	fmt.Println(joined == crc32c.Checksum(append(a, b...)))
	// Output: true
}
