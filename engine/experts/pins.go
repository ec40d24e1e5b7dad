package experts

import (
	"context"
	"fmt"
	"slices"

	"github.com/spoolhq/spool/native/diskio"
)

// pinCandidates ranks the usage history: count descending, then layer,
// then expert ascending; only streamed layers and used experts.
func (s *Streamed) pinCandidates() []UsageRecord {
	var recs []UsageRecord
	for _, r := range s.usage.Records() {
		if _, ok := s.byLayer[r.Layer]; ok && r.Count > 0 {
			recs = append(recs, r)
		}
	}
	slices.SortStableFunc(recs, func(a, b UsageRecord) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		if a.Layer != b.Layer {
			return a.Layer - b.Layer
		}
		return a.Expert - b.Expert
	})
	return recs
}

// pinList is the prefix of the ranking that fits PinnedBytes.
func (s *Streamed) pinList() []UsageRecord {
	var used int64
	var out []UsageRecord
	for _, r := range s.pinCandidates() {
		size := s.byLayer[r.Layer].class.size
		if used+size > s.opts.PinnedBytes {
			break
		}
		used += size
		out = append(out, r)
	}
	return out
}

// pinBytesPlanned is the slab memory of the pinned tier: the listed pins,
// and with live re-pinning the spare pinned slots too.
func (s *Streamed) pinBytesPlanned() int64 {
	var n int64
	for _, r := range s.pinList() {
		n += s.byLayer[r.Layer].class.size
	}
	for _, lc := range s.sparePlan(n) {
		n += lc.class.size
	}
	return n
}

// sparePlan lists, with live re-pinning, the layers that get an empty
// pinned slot each, one slot per layer in turn, from what PinnedBytes
// leaves after used bytes of listed pins: re-pinning fills them with
// experts the session turns out to use most, so pins are learned live
// when the history is short or stale.
func (s *Streamed) sparePlan(used int64) []*layerCache {
	if s.opts.RepinEvery <= 0 {
		return nil
	}
	var out []*layerCache
	for {
		added := false
		for _, lc := range s.layers {
			if used+lc.class.size > s.opts.PinnedBytes {
				continue
			}
			used += lc.class.size
			out = append(out, lc)
			added = true
		}
		if !added {
			return out
		}
	}
}

// loadPins reads the pinned experts, all at once, and waits for them.
func (s *Streamed) loadPins(ctx context.Context) error {
	pins := s.pinList()
	var used int64
	for _, r := range pins {
		used += s.byLayer[r.Layer].class.size
	}
	for _, lc := range s.sparePlan(used) {
		sl, err := s.newSlot(lc.class, tierPinned)
		if err != nil {
			return err
		}
		sl.layer = lc.layer
		lc.spare = append(lc.spare, sl)
	}
	if len(pins) == 0 {
		return nil
	}
	// The pins are one lease's fills, waited for here.
	l := s.newLease(ctx, nil, make([]int, len(pins)))
	defer l.cancel()
	for i, r := range pins {
		lc := s.byLayer[r.Layer]
		sl, err := s.newSlot(lc.class, tierPinned)
		if err != nil {
			return err
		}
		sl.layer, sl.expert, sl.state = lc.layer, r.Expert, slotReading
		lc.pinned[r.Expert] = sl
		l.ids[i] = r.Expert
		l.items[i] = leaseItem{slot: sl, gen: sl.gen, lc: lc, id: r.Expert, state: itemQueued}
	}
	var reqs []diskio.ReadRequest
	s.mu.Lock()
	for i := range l.items {
		reqs = append(reqs, l.fillLocked(i)...)
	}
	s.mu.Unlock()
	s.submitReads(reqs)
	for {
		s.mu.Lock()
		n, err := l.inflight, l.err
		s.mu.Unlock()
		if n == 0 {
			if err != nil {
				return fmt.Errorf("experts: loading pinned experts: %w", err)
			}
			return nil
		}
		<-l.notify
	}
}
