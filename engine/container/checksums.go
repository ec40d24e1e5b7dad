package container

import (
	"slices"
	"sync/atomic"

	"github.com/spoolhq/spool/native/diskio"
)

// Checksums are the CRC-32C (Castagnoli) of the routed experts' extents
// as the weights' fingerprint took them (engine/fingerprint, through
// loader.Dir.Fingerprint): what each extent's bytes must sum to, for the
// version of its shard the fingerprint read (its stamp). The streamed tier
// checks every expert read against them. Read-only once set on a
// container.
type Checksums struct {
	shards map[string]*shardSums
	n      int
}

type shardSums struct {
	stamp diskio.Stamp
	sums  []extentSum // by offset, then length
}

type extentSum struct {
	off, n int64
	crc    uint32
}

// ChecksumBytes is the memory one extent's checksum takes.
const ChecksumBytes = 24

// NewChecksums returns an empty set.
func NewChecksums() *Checksums { return &Checksums{shards: map[string]*shardSums{}} }

// Add records the checksums of extents of the shard named shard, as read
// at stamp; sums[i] is extents[i]'s (every extent is of that shard).
func (c *Checksums) Add(shard string, stamp diskio.Stamp, extents []Extent, sums []uint32) {
	s := &shardSums{stamp: stamp, sums: make([]extentSum, len(extents))}
	for i, e := range extents {
		s.sums[i] = extentSum{off: e.Offset, n: e.Length, crc: sums[i]}
	}
	slices.SortFunc(s.sums, func(a, b extentSum) int {
		if a.off != b.off {
			return compare(a.off, b.off)
		}
		return compare(a.n, b.n)
	})
	if old := c.shards[shard]; old != nil {
		c.n -= len(old.sums)
	}
	c.shards[shard] = s
	c.n += len(s.sums)
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Lookup returns the checksum of e's bytes and the stamp of the shard
// version it was taken from; ok is false when it has none.
func (c *Checksums) Lookup(e Extent) (sum uint32, stamp diskio.Stamp, ok bool) {
	if c == nil {
		return 0, diskio.Stamp{}, false
	}
	s := c.shards[e.File]
	if s == nil {
		return 0, diskio.Stamp{}, false
	}
	i, found := slices.BinarySearchFunc(s.sums, e, func(x extentSum, e Extent) int {
		if x.off != e.Offset {
			return compare(x.off, e.Offset)
		}
		return compare(x.n, e.Length)
	})
	if !found {
		return 0, diskio.Stamp{}, false
	}
	return s.sums[i].crc, s.stamp, true
}

// ShardStamp returns the stamp of the version of shard whose extents the
// set holds checksums of; ok is false when it holds none of that shard.
func (c *Checksums) ShardStamp(shard string) (n int, stamp diskio.Stamp, ok bool) {
	if c == nil || c.shards[shard] == nil {
		return 0, diskio.Stamp{}, false
	}
	s := c.shards[shard]
	return len(s.sums), s.stamp, true
}

// Len is the number of extents with a checksum.
func (c *Checksums) Len() int {
	if c == nil {
		return 0
	}
	return c.n
}

// checksums is set once, before the experts are read; readers load it.
type checksums = atomic.Pointer[Checksums]

// SetChecksums gives the container its experts' checksums (nil: none).
func (c *Container) SetChecksums(cs *Checksums) { c.sums.Store(cs) }

// Checksums returns the experts' checksums set on the container, nil when
// none were.
func (c *Container) Checksums() *Checksums { return c.sums.Load() }
