package experts

import (
	"math/bits"
	"time"
)

// Counters are the streamed tier's figures over some span.
type Counters struct {
	// Hits counts experts found resident (LRU or pinned); PinnedHits the
	// pinned part of them. Misses counts experts read from disk.
	Hits, PinnedHits, Misses int64
	// Reads and BytesRead count read requests and the bytes asked of the
	// file system (aligned spans under direct I/O).
	Reads, BytesRead int64
	// DiskTime sums the service time of every read (reads overlap, so it
	// may exceed wall time).
	DiskTime time.Duration
	// Wait is foreground wait: time the consumer spent blocked in Next
	// for a read to land.
	Wait time.Duration
	// Unpacked counts packed experts decoded, Decoded the bytes they
	// rebuilt and DecodeTime the time spent decoding (the decode pool's
	// CPU time, over every core, overlapping reads).
	Unpacked   int64
	Decoded    int64
	DecodeTime time.Duration
	// Prefetched counts experts read ahead (Prefetch), PrefetchHits those
	// an Acquire then asked for (each also counts as a miss: the policy
	// did not hold it), PrefetchCancelled the wrong guesses dropped.
	Prefetched, PrefetchHits, PrefetchCancelled int64
}

// HitRate is Hits / (Hits + Misses), 0 without lookups.
func (c Counters) HitRate() float64 {
	if n := c.Hits + c.Misses; n > 0 {
		return float64(c.Hits) / float64(n)
	}
	return 0
}

func (c *Counters) add(o Counters) {
	c.Hits += o.Hits
	c.PinnedHits += o.PinnedHits
	c.Misses += o.Misses
	c.Reads += o.Reads
	c.BytesRead += o.BytesRead
	c.DiskTime += o.DiskTime
	c.Wait += o.Wait
	c.Unpacked += o.Unpacked
	c.Decoded += o.Decoded
	c.DecodeTime += o.DecodeTime
	c.Prefetched += o.Prefetched
	c.PrefetchHits += o.PrefetchHits
	c.PrefetchCancelled += o.PrefetchCancelled
}

// LayerStats are one expert layer's counters.
type LayerStats struct {
	Layer       int
	Turn, Total Counters
}

// Stats is a snapshot of the streamed tier.
type Stats struct {
	// Turn covers the time since the last ResetTurn, Total since startup.
	Turn, Total Counters
	Layers      []LayerStats
	// Forwards counts forwards (acquisitions of the first expert layer).
	Forwards int
	// Pinned and Cached count experts resident in the pinned and LRU tiers.
	Pinned, Cached int
	// LRUSlots is the LRU capacity summed over layers; WorkingSlots the
	// working bank's slots over all slot classes.
	LRUSlots, WorkingSlots int
	// SlabBytes is the memory of every slab allocated.
	SlabBytes int64
	// Shrinks counts LRU slots given back by the footprint guard.
	Shrinks int
	// Repins counts live re-pinning swaps.
	Repins int
}

// telemetry holds the counters; it is guarded by the source's mutex.
type telemetry struct {
	experts int
	turn    []Counters // per expert layer (layerCache.index)
	total   []Counters
	hits    []byte // routed bitmap since the last HitBitmap, LSB-first
	shrinks int
	repins  int
}

func (t *telemetry) init(layers, experts int) {
	t.experts = experts
	t.turn = make([]Counters, layers)
	t.total = make([]Counters, layers)
	t.hits = make([]byte, (layers*experts+7)/8)
}

func (t *telemetry) routed(layer, expert int) {
	b := layer*t.experts + expert
	t.hits[b>>3] |= 1 << (b & 7)
}

func (t *telemetry) hit(layer int, pinned bool) {
	for _, c := range []*Counters{&t.turn[layer], &t.total[layer]} {
		c.Hits++
		if pinned {
			c.PinnedHits++
		}
	}
}

func (t *telemetry) miss(layer int) {
	t.turn[layer].Misses++
	t.total[layer].Misses++
}

func (t *telemetry) read(layer int, n int64, service time.Duration) {
	for _, c := range []*Counters{&t.turn[layer], &t.total[layer]} {
		c.Reads++
		c.BytesRead += n
		c.DiskTime += service
	}
}

func (t *telemetry) unpacked(layer int, n int64, spent time.Duration) {
	for _, c := range []*Counters{&t.turn[layer], &t.total[layer]} {
		c.Unpacked++
		c.Decoded += n
		c.DecodeTime += spent
	}
}

func (t *telemetry) prefetched(layer int) {
	t.turn[layer].Prefetched++
	t.total[layer].Prefetched++
}

func (t *telemetry) prefetchHit(layer int) {
	t.turn[layer].PrefetchHits++
	t.total[layer].PrefetchHits++
}

func (t *telemetry) prefetchCancelled(layer int) {
	t.turn[layer].PrefetchCancelled++
	t.total[layer].PrefetchCancelled++
}

func (t *telemetry) wait(layer int, d time.Duration) {
	t.turn[layer].Wait += d
	t.total[layer].Wait += d
}

// Stats returns a snapshot of the counters and tiers.
func (s *Streamed) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Forwards: s.forwards, SlabBytes: s.slabBytes, Shrinks: s.tel.shrinks, Repins: s.tel.repins}
	for _, cl := range s.classes {
		st.WorkingSlots += cl.all
	}
	for _, lc := range s.layers {
		ls := LayerStats{Layer: lc.layer, Turn: s.tel.turn[lc.index], Total: s.tel.total[lc.index]}
		st.Layers = append(st.Layers, ls)
		st.Turn.add(ls.Turn)
		st.Total.add(ls.Total)
		st.Pinned += len(lc.pinned)
		st.LRUSlots += len(lc.slots)
		for _, sl := range lc.slots {
			if sl.state == slotReady {
				st.Cached++
			}
		}
	}
	return st
}

// ResetTurn zeroes the per-turn counters.
func (s *Streamed) ResetTurn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tel.turn)
}

// Map tiers, in the top two bits of each ExpertMap byte.
const (
	MapDisk   = 0 // read from disk when routed
	MapLRU    = 1 // resident in its layer's LRU
	MapPinned = 2 // pinned
)

// ExpertMap returns one byte per expert, rows = expert layers in order
// (the MTP layer last when streamed), columns = expert ids: tier << 6 |
// heat, where tier is MapDisk, MapLRU or MapPinned (Colibri's EMAP uses 1
// for any RAM tier and 2 for VRAM; here RAM is split instead) and heat is
// the bit length of the persistent usage count, capped at 63.
func (s *Streamed) ExpertMap() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	E := s.cfg.NumRoutedExperts
	out := make([]byte, len(s.layers)*E)
	for _, lc := range s.layers {
		row := out[lc.index*E : (lc.index+1)*E]
		for e := range row {
			row[e] = byte(min(63, bits.Len64(s.usage.Count(lc.layer, e))))
		}
		for id, sl := range lc.lru {
			if sl.state == slotReady {
				row[id] |= MapLRU << 6
			}
		}
		for id := range lc.pinned {
			row[id] = row[id]&63 | MapPinned<<6
		}
	}
	return out
}

// HitBitmap returns one bit per expert routed since the previous call —
// bit b = row*experts + expert in byte b>>3 at bit b&7 (LSB-first), rows
// as in ExpertMap — and clears it.
func (s *Streamed) HitBitmap() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]byte(nil), s.tel.hits...)
	clear(s.tel.hits)
	return out
}

// Usage returns a copy of the usage history.
func (s *Streamed) Usage() *Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage.clone()
}
