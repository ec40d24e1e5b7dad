package experts

import (
	"testing"

	"github.com/spoolhq/spool/native/diskio"
)

// TestChunks: the requests of an extent cover exactly its bytes, each
// after the first starts aligned, and each lands where the single aligned
// read would have put its bytes.
func TestChunks(t *testing.T) {
	const A = diskio.DirectAlign
	for _, tc := range []struct{ off, n, size int64 }{
		{0, 1, A}, {1, 1, A}, {A - 1, 2, A}, {100, 5 * A, A}, {100, 5*A - 100, 2 * A},
		{12345, 18_874_368, 4 << 20}, {4 << 20, 4 << 20, 4 << 20}, {7, 3, 4 << 20},
	} {
		lo := &layout{reads: []extentRead{{off: tc.off, n: tc.n, at: 3 * A, room: diskio.SlabLen(tc.n)}}}
		start, _ := diskio.AlignedSpan(tc.off, tc.n)
		next := tc.off
		for i, c := range lo.chunks(tc.size) {
			if c.off != next || c.n <= 0 || c.n > tc.size {
				t.Fatalf("%+v chunk %d: [%d, +%d), want start %d and 1..%d bytes", tc, i, c.off, c.n, next, tc.size)
			}
			if i > 0 && c.off%A != 0 {
				t.Fatalf("%+v chunk %d starts unaligned at %d", tc, i, c.off)
			}
			cs, _ := diskio.AlignedSpan(c.off, c.n)
			if c.at != 3*A+cs-start || c.at%A != 0 {
				t.Fatalf("%+v chunk %d lands at %d, want %d", tc, i, c.at, 3*A+cs-start)
			}
			if _, span := diskio.AlignedSpan(c.off, c.n); c.at+span > 3*A+diskio.SlabLen(tc.n) {
				t.Fatalf("%+v chunk %d overruns the region", tc, i)
			}
			next = c.off + c.n
		}
		if next != tc.off+tc.n {
			t.Fatalf("%+v: chunks end at %d, want %d", tc, next, tc.off+tc.n)
		}
	}
}
