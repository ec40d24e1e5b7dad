package fingerprint

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/spoolhq/spool/internal/crc32c"
)

// regionSet is one file's Options.Regions, checked: in the caller's
// order, and sorted by offset for summing as the file streams by.
type regionSet struct {
	given  []Region
	sorted []int // indices into given, by offset
}

func newRegionSet(rs []Region) (*regionSet, error) {
	s := &regionSet{given: rs, sorted: make([]int, len(rs))}
	for i, r := range rs {
		if r.Off < 0 || r.Len < 0 || r.Off > r.Off+r.Len {
			return nil, fmt.Errorf("region %d: offset %d length %d", i, r.Off, r.Len)
		}
		s.sorted[i] = i
	}
	slices.SortFunc(s.sorted, func(a, b int) int {
		if rs[a].Off != rs[b].Off {
			return cmpInt64(rs[a].Off, rs[b].Off)
		}
		return cmpInt64(rs[a].Len, rs[b].Len)
	})
	for k := 1; k < len(s.sorted); k++ {
		p, q := rs[s.sorted[k-1]], rs[s.sorted[k]]
		if p.Off+p.Len > q.Off && q.Len > 0 && p.Len > 0 {
			return nil, fmt.Errorf("regions at %d (+%d) and %d (+%d) overlap", p.Off, p.Len, q.Off, q.Len)
		}
	}
	return s, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// within checks that every region lies in a file of size bytes.
func (s *regionSet) within(size int64) error {
	if s == nil {
		return nil
	}
	for _, r := range s.given {
		if r.Off+r.Len > size {
			return fmt.Errorf("a region ends at %d, past the end of the file (%d bytes)", r.Off+r.Len, size)
		}
	}
	return nil
}

// digest names the set, so that checksums remembered for other regions
// are never taken for these.
func (s *regionSet) digest() string {
	if s == nil {
		return ""
	}
	h := sha256.New()
	var b [16]byte
	for _, r := range s.given {
		binary.LittleEndian.PutUint64(b[:8], uint64(r.Off))
		binary.LittleEndian.PutUint64(b[8:], uint64(r.Len))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// regionSums sums the regions of a set as the file's bytes go by, in
// order from its start.
type regionSums struct {
	s    *regionSet
	crc  []uint32 // by index into given
	next int      // the first region (in sorted) not wholly summed
}

func (s *regionSet) summer() *regionSums {
	if s == nil {
		return &regionSums{}
	}
	return &regionSums{s: s, crc: make([]uint32, len(s.given))}
}

// add sums the file bytes b, which start at offset off.
func (r *regionSums) add(off int64, b []byte) {
	if r.s == nil {
		return
	}
	end := off + int64(len(b))
	for k := r.next; k < len(r.s.sorted); k++ {
		i := r.s.sorted[k]
		g := r.s.given[i]
		if g.Off >= end {
			break
		}
		lo, hi := max(g.Off, off), min(g.Off+g.Len, end)
		if lo < hi {
			r.crc[i] = crc32c.Update(r.crc[i], b[lo-off:hi-off])
		}
	}
	for r.next < len(r.s.sorted) {
		if g := r.s.given[r.s.sorted[r.next]]; g.Off+g.Len > end {
			break
		}
		r.next++
	}
}

// result is the regions' checksums, in the caller's order (nil for no
// regions).
func (r *regionSums) result() []uint32 { return r.crc }

// encodeSums and decodeSums are the store's form of a file's checksums:
// little-endian, as hex.
func encodeSums(sums []uint32) string {
	b := make([]byte, 0, 4*len(sums))
	for _, c := range sums {
		b = binary.LittleEndian.AppendUint32(b, c)
	}
	return hex.EncodeToString(b)
}

func decodeSums(s string, n int) ([]uint32, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, err
	}
	if len(b) != 4*n {
		return nil, errors.New("checksums of another count")
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out, nil
}
