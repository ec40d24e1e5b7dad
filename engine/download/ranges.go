package download

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Range is the byte range [Start, End) of a blob.
type Range struct {
	Start, End int64
}

// Len is End - Start.
func (r Range) Len() int64 { return r.End - r.Start }

// Ranges is a set of byte ranges kept sorted, merged and non-empty.
type Ranges []Range

// Add puts r into the set, merging it with ranges it touches or overlaps.
func (rs Ranges) Add(r Range) Ranges {
	if r.Len() <= 0 {
		return rs
	}
	i := sort.Search(len(rs), func(i int) bool { return rs[i].End >= r.Start })
	j := i
	for j < len(rs) && rs[j].Start <= r.End {
		r.Start = min(r.Start, rs[j].Start)
		r.End = max(r.End, rs[j].End)
		j++
	}
	out := make(Ranges, 0, len(rs)-(j-i)+1)
	out = append(out, rs[:i]...)
	out = append(out, r)
	return append(out, rs[j:]...)
}

// Len is the number of bytes in the set.
func (rs Ranges) Len() int64 {
	var n int64
	for _, r := range rs {
		n += r.Len()
	}
	return n
}

// Prefix is the length of the range that starts at byte 0, or 0.
func (rs Ranges) Prefix() int64 {
	if len(rs) > 0 && rs[0].Start == 0 {
		return rs[0].End
	}
	return 0
}

// Missing returns the ranges of [0, size) not in the set.
func (rs Ranges) Missing(size int64) Ranges {
	var out Ranges
	pos := int64(0)
	for _, r := range rs {
		if r.Start >= size {
			break
		}
		if r.Start > pos {
			out = append(out, Range{pos, r.Start})
		}
		pos = max(pos, r.End)
	}
	if pos < size {
		out = append(out, Range{pos, size})
	}
	return out
}

// Overlap is the number of bytes of r that are in the set.
func (rs Ranges) Overlap(r Range) int64 {
	var n int64
	for _, x := range rs {
		lo, hi := max(x.Start, r.Start), min(x.End, r.End)
		if hi > lo {
			n += hi - lo
		}
	}
	return n
}

// Clip drops every byte at or past size.
func (rs Ranges) Clip(size int64) Ranges {
	var out Ranges
	for _, r := range rs {
		if r.Start >= size {
			break
		}
		out = append(out, Range{r.Start, min(r.End, size)})
	}
	return out
}

// partialVersion is the version of the resume record format.
const partialVersion = 1

// partialRecord is the resume record kept next to a partial blob, at
// blobs/<etag>.incomplete.spool.json: the byte ranges of the .incomplete file
// that were written and synced to disk before the record was written.
type partialRecord struct {
	Version int        `json:"version"`
	Etag    string     `json:"etag"`
	Size    int64      `json:"size"`
	Done    [][2]int64 `json:"done"`
}

func encodePartial(etag string, size int64, done Ranges) ([]byte, error) {
	rec := partialRecord{Version: partialVersion, Etag: etag, Size: size, Done: make([][2]int64, len(done))}
	for i, r := range done {
		rec.Done[i] = [2]int64{r.Start, r.End}
	}
	return json.Marshal(rec)
}

// parsePartial reads a resume record and checks it against the blob it must
// describe: same etag and size, ranges sorted, disjoint, inside the blob.
func parsePartial(b []byte, etag string, size int64) (Ranges, error) {
	var rec partialRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("resume record is not the expected JSON: %w", err)
	}
	if rec.Version != partialVersion {
		return nil, fmt.Errorf("resume record version %d, want %d", rec.Version, partialVersion)
	}
	if rec.Etag != etag || rec.Size != size {
		return nil, fmt.Errorf("resume record is for blob %q of %d bytes, want %q of %d", rec.Etag, rec.Size, etag, size)
	}
	var out Ranges
	prevEnd := int64(-1)
	for i, d := range rec.Done {
		r := Range{d[0], d[1]}
		if r.Start < 0 || r.End <= r.Start || r.End > size {
			return nil, fmt.Errorf("resume record range %d [%d, %d) is empty or outside the blob's %d bytes", i, r.Start, r.End, size)
		}
		if r.Start <= prevEnd {
			return nil, fmt.Errorf("resume record range %d [%d, %d) is out of order or touches the previous one", i, r.Start, r.End)
		}
		prevEnd = r.End
		out = append(out, r)
	}
	return out, nil
}
