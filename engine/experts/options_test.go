package experts_test

import (
	"testing"

	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/native/diskio"
)

// TestReadWorkers: the default read depth puts one token's experts of a
// layer in flight at once, within [8, diskio.MaxReadWorkers].
func TestReadWorkers(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name        string
		k           int
		expertBytes int64
		chunk       int64
		want        int
	}{
		{"GLM-5.2: 8 experts of 18,915,328 bytes in 4 MiB requests", 8, 18915328, 4 * mib, 40},
		{"one request an expert", 8, 4 * mib, 4 * mib, 8},
		{"small experts: never below 8", 2, mib, 4 * mib, 8},
		{"huge experts: never above the pool's bound", 8, 256 * mib, 4 * mib, diskio.MaxReadWorkers},
		{"a partial last chunk is a request", 4, 4*mib + 1, 4 * mib, 8},
		{"no geometry: the floor", 0, 0, 0, 8},
	}
	for _, c := range cases {
		if got := experts.ReadWorkers(c.k, c.expertBytes, c.chunk); got != c.want {
			t.Errorf("%s: ReadWorkers(%d, %d, %d) = %d, want %d", c.name, c.k, c.expertBytes, c.chunk, got, c.want)
		}
	}
}
