package experts

import (
	"context"
	"fmt"
	"slices"

	"github.com/spoolhq/spool/native"
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

func (s *Streamed) pinBytesPlanned() int64 {
	var n int64
	for _, r := range s.pinList() {
		n += s.byLayer[r.Layer].class.size
	}
	return n
}

// loadPins reads the pinned experts, all at once, and waits for them.
func (s *Streamed) loadPins(ctx context.Context) error {
	pins := s.pinList()
	if len(pins) == 0 {
		return nil
	}
	n := 0
	for _, r := range pins {
		n += s.byLayer[r.Layer].layouts[r.Expert].events(s.opts.ReadChunk)
	}
	l := &streamLease{s: s, events: make(chan readEvent, n)}
	l.ctx, l.cancel = context.WithCancel(ctx)
	defer l.cancel()
	var reqs []native.ReadRequest
	for i, r := range pins {
		lc := s.byLayer[r.Layer]
		sl, err := s.newSlot(lc.class, tierPinned)
		if err != nil {
			return err
		}
		sl.layer, sl.expert, sl.state = lc.layer, r.Expert, slotReading
		lc.pinned[r.Expert] = sl
		l.items = append(l.items, leaseItem{slot: sl, gen: sl.gen, lc: lc, id: r.Expert})
		reqs = append(reqs, l.readsFor(i)...)
	}
	l.submit(reqs)
	for l.inflight > 0 {
		ev := <-l.events
		s.mu.Lock()
		l.handle(ev)
		s.mu.Unlock()
	}
	if l.err != nil {
		return fmt.Errorf("experts: loading pinned experts: %w", l.err)
	}
	return nil
}
