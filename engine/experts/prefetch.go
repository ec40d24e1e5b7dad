package experts

import (
	"context"
	"fmt"
	"slices"

	"github.com/spoolhq/spool/native/diskio"
)

// prefetch is one expert read ahead of its Acquire into a working slot.
// Its reads are background requests: the read pool serves them only when
// no Acquire's read waits. Guarded by the source's mutex.
type prefetch struct {
	lc     *layerCache
	id     int
	slot   *slot
	cancel context.CancelFunc
	// left counts completions not yet in (read requests, plus the decode
	// of a packed expert); err is the first failure.
	left int
	err  error
	// cancelled: the prediction was wrong (or the slot was needed); the
	// slot goes back to the bank once every completion is in.
	cancelled bool
	// lease and item, once an Acquire adopted the prefetch: its
	// remaining completions go to that lease as its own reads'.
	lease *streamLease
	item  int
}

// Prefetch implements Prefetcher: it starts reading, at background
// priority, those of ids (layer's experts some Acquire will probably ask
// for soon) that are neither pinned, nor in the LRU, nor already being
// read ahead, into free working slots, keeping free what the Acquire about
// to run may need (as many as ids, less the slots its own read-aheads
// already hold). It cancels the
// layer's earlier read-aheads that ids no longer names. It returns at once.
func (s *Streamed) Prefetch(ctx context.Context, layer int, ids []int) {
	s.mu.Lock()
	lc, ok := s.byLayer[layer]
	if s.closed || !ok || !s.opts.Prefetch {
		s.mu.Unlock()
		return
	}
	for id, pf := range lc.prefetched {
		if !slices.Contains(ids, id) {
			s.cancelPrefetchLocked(pf)
		}
	}
	// Keep free what the Acquire about to run (another layer's) may
	// need: about len(ids) slots, less those its own read-aheads hold.
	cl := lc.class
	held := 0
	for _, other := range s.layers {
		if other != lc && other.class == cl {
			held += len(other.prefetched)
		}
	}
	reserve := max(0, len(ids)-held)
	var reqs []diskio.ReadRequest
	for _, id := range ids {
		if len(cl.free) <= reserve {
			break
		}
		if id < 0 || id >= len(lc.layouts) || lc.prefetched[id] != nil || lc.lru[id] != nil || lc.pinned[id] != nil {
			continue
		}
		sl := cl.free[len(cl.free)-1]
		cl.free = cl.free[:len(cl.free)-1]
		sl.layer, sl.expert, sl.state, sl.refs = layer, id, slotReading, 1
		pf := &prefetch{lc: lc, id: id, slot: sl}
		var pctx context.Context
		pctx, pf.cancel = context.WithCancel(ctx)
		lc.prefetched[id] = pf
		reqs = append(reqs, s.prefetchReads(pctx, pf)...)
		s.tel.prefetched(lc.row)
	}
	if len(reqs) == 0 {
		s.mu.Unlock()
		return
	}
	s.bgSubmit.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.bgSubmit.Done()
		for _, req := range reqs {
			pctx := req.Tag.(prefetchTag).ctx
			if _, err := s.pool.Submit(pctx, req); err != nil {
				req.Done(diskio.ReadResult{Tag: req.Tag, Err: err})
			}
		}
	}()
}

// Prefetching implements Prefetcher.
func (s *Streamed) Prefetching() bool { return s.opts.Prefetch }

type prefetchTag struct {
	pf  *prefetch
	u   *unpackState
	ctx context.Context
}

// prefetchReads builds the background requests of pf.
func (s *Streamed) prefetchReads(ctx context.Context, pf *prefetch) []diskio.ReadRequest {
	lo := pf.lc.layouts[pf.id]
	tag := prefetchTag{pf: pf, ctx: ctx}
	if lo.packed != nil {
		tag.u = newUnpackState(lo, pf.slot.slab, s.opts.ReadChunk, s.opts.DecodeLoop, s.files)
		pf.left++
	}
	cs := lo.chunks(s.opts.ReadChunk)
	reqs := make([]diskio.ReadRequest, len(cs))
	for k, c := range cs {
		r := lo.reads[c.read]
		req := diskio.ReadRequest{File: s.files[r.file], Off: c.off, Len: c.n, Slab: pf.slot.slab[c.at : r.at+r.room], Tag: tag, Background: true}
		file := req.File.Path()
		off := c.off
		req.Done = func(res diskio.ReadResult) {
			s.prefetchDone(pf, readEvent{file: file, res: res})
			if tag.u == nil {
				return
			}
			if final, err := tag.u.landed(off, res.Err); final {
				s.prefetchDone(pf, readEvent{file: file, res: diskio.ReadResult{Tag: tag, Err: err}, unpacked: true, u: tag.u})
			}
		}
		reqs[k] = req
	}
	pf.left += len(reqs)
	return reqs
}

// prefetchDone applies one completion of pf: forwarded to the lease that
// adopted it, or counted; the last one of an unadopted prefetch builds the
// matrices (the slot becomes ready for an Acquire) or, cancelled or
// failed, gives the slot back.
func (s *Streamed) prefetchDone(pf *prefetch, ev readEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := pf.lease; l != nil {
		ev.item = pf.item
		l.events <- ev // room was made when the lease adopted pf
		return
	}
	pf.left--
	switch {
	case ev.unpacked:
		s.tel.unpacked(pf.lc.row, ev.u.out, ev.u.spent)
	default:
		s.tel.read(pf.lc.row, ev.res.Bytes, ev.res.Service)
	}
	if ev.res.Err != nil && pf.err == nil {
		pf.err = fmt.Errorf("experts: reading ahead layer %d expert %d from %s: %w", pf.lc.layer, pf.id, ev.file, ev.res.Err)
	}
	if pf.left > 0 {
		return
	}
	if pf.cancelled || pf.err != nil {
		s.dropPrefetchLocked(pf)
		return
	}
	lo := pf.lc.layouts[pf.id]
	if ev.unpacked {
		lo = s.unpackedLocked(pf.lc, pf.id, ev.u)
	}
	ex, err := lo.matrices(pf.slot.slab)
	if err != nil {
		pf.err = err
		pf.cancelled = true
		s.dropPrefetchLocked(pf)
		return
	}
	pf.slot.ex, pf.slot.state = ex, slotReady
}

// cancelPrefetchLocked stops a prefetch nobody adopted: its queued reads
// end at once, and its slot goes back when the last completion is in.
func (s *Streamed) cancelPrefetchLocked(pf *prefetch) {
	if pf.cancelled || pf.lease != nil {
		return
	}
	pf.cancelled = true
	pf.cancel()
	if pf.lc.prefetched[pf.id] == pf {
		delete(pf.lc.prefetched, pf.id)
	}
	s.tel.prefetchCancelled(pf.lc.row)
	if pf.left == 0 {
		s.dropPrefetchLocked(pf)
	}
}

// dropPrefetchLocked gives a finished, unadopted prefetch's slot back.
func (s *Streamed) dropPrefetchLocked(pf *prefetch) {
	if pf.lc.prefetched[pf.id] == pf {
		delete(pf.lc.prefetched, pf.id)
	}
	pf.cancel()
	if pf.slot != nil {
		pf.slot.refs--
		s.releaseWorking(pf.slot)
		pf.slot = nil
	}
}

// adoptPrefetchLocked hands an Acquire the prefetch of its miss i, if a
// usable one exists: the item takes the prefetch's slot, ready or with
// its remaining completions coming to l. It returns false when there is
// none (the miss is read as usual).
func (l *streamLease) adoptPrefetchLocked(i int) bool {
	it := &l.items[i]
	pf := it.lc.prefetched[it.id]
	if pf == nil {
		return false
	}
	if pf.cancelled || pf.err != nil {
		l.s.cancelPrefetchLocked(pf)
		return false
	}
	delete(it.lc.prefetched, it.id)
	l.s.tel.prefetchHit(it.lc.row)
	it.slot, it.gen = pf.slot, pf.slot.gen
	if pf.left == 0 {
		it.state = itemReady
		l.ready = append(l.ready, i)
		pf.cancel()
		return true
	}
	it.state = itemQueued
	it.readsLeft = pf.left
	l.inflight += pf.left
	pf.lease, pf.item = l, i
	l.adopted = append(l.adopted, pf.cancel) // Release stops them with its own reads
	return true
}

// stealPrefetchLocked cancels one prefetch of class cl (ready ones
// first: their slot frees at once) so that a demand read gets a working
// slot; it reports whether it found one.
func (s *Streamed) stealPrefetchLocked(cl *slotClass) bool {
	var reading *prefetch
	for _, lc := range s.layers {
		if lc.class != cl {
			continue
		}
		for _, pf := range lc.prefetched {
			if pf.left == 0 {
				s.cancelPrefetchLocked(pf)
				return true
			}
			reading = pf
		}
	}
	if reading != nil {
		s.cancelPrefetchLocked(reading)
		return true
	}
	return false
}

// cancelAllPrefetchLocked cancels every unadopted prefetch.
func (s *Streamed) cancelAllPrefetchLocked() {
	for _, lc := range s.layers {
		for _, pf := range lc.prefetched {
			s.cancelPrefetchLocked(pf)
		}
	}
}

// prefetchesLocked counts working slots held by read-aheads, adopted or
// not, whose reads are not all in.
func (s *Streamed) prefetchesLocked() int {
	n := 0
	for _, cl := range s.classes {
		n += cl.all - len(cl.free)
	}
	return n
}

// Order implements Prefetcher: the next Acquire of layer reads its
// misses in the order of ids (most wanted first), those ids does not
// name after them.
func (s *Streamed) Order(layer int, ids []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lc, ok := s.byLayer[layer]; ok && !s.closed {
		lc.order = slices.Clone(ids)
	}
}

// rankLocked sets l.rank from the layer's Order hint, which it consumes.
func (l *streamLease) rankLocked() {
	l.rank = make([]int, len(l.ids))
	pos := map[int]int{}
	for i, id := range l.lc.order {
		if _, dup := pos[id]; !dup {
			pos[id] = i
		}
	}
	l.lc.order = nil
	for i, id := range l.ids {
		if p, ok := pos[id]; ok {
			l.rank[i] = p
		} else {
			l.rank[i] = len(pos) + id
		}
	}
}
