package experts

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/native"
)

// StreamOptions size and tune a Streamed source.
type StreamOptions struct {
	// CacheBytes is the slab memory of the LRU and pinned tiers together,
	// beyond the working bank. Each expert layer gets the same number of
	// LRU slots: (CacheBytes - pinned slab bytes) / (one slot in every
	// expert layer). 0 means no cache: every expert is read per forward.
	CacheBytes int64
	// WorkingSlots is the working bank of decoder-layer slots that stream
	// the misses no LRU slot takes (default 2 x experts_per_tok). The MTP
	// layer's experts (twice as wide) get min(WorkingSlots,
	// experts_per_tok) slots of their own.
	WorkingSlots int
	// Workers is the number of positioned-read workers (default 8).
	Workers int
	// PinnedBytes is the slab memory, taken out of CacheBytes, for experts
	// pinned at startup: the most used ones of the usage history, ranked
	// by count (ties: lower layer, then lower expert id first), admitted
	// while the next one still fits.
	PinnedBytes int64
	// UsagePath is the persistent usage history (the .coli_usage text
	// format). It is read at startup when it exists and written
	// atomically by SaveUsage and Close. Empty: no history.
	UsagePath string
	// FootprintLimit, when positive, is the process footprint budget: every
	// GuardEvery forwards the footprint is sampled and, while it is above
	// the limit, each layer's LRU gives back one slot (the least recently
	// used unleased one), freeing its slab.
	FootprintLimit int64
	// GuardEvery is the forwards between footprint samples (default 16).
	GuardEvery int
	// ReadChunk bounds one read request (default 4 MiB, rounded up to the
	// direct-I/O alignment): an expert's bytes go out as several requests
	// so that a layer's few misses keep every worker busy.
	ReadChunk int64
	// Buffered reads through the page cache instead of direct I/O (for file
	// systems that refuse direct I/O; OpenDirect falls back by itself).
	Buffered bool
}

// Streamed is the streamed expert tier: routed experts live on disk and
// are read, on demand, into a fixed set of aligned slabs allocated once at
// startup — a working bank shared by all layers, per-layer LRU slots, and
// pinned slots. A forward's misses are all submitted to the read pool at
// Acquire; the lease hands out resident experts first and misses as their
// reads land.
//
// Policy (deterministic, per layer): a hit in the LRU is stamped with a
// clock in ascending id order; then the misses are admitted into LRU slots
// in ascending id order, at most as many as there are slots this lease does
// not hold (the highest ids win when fewer), each taking an empty slot
// (lowest first) or else evicting the unleased entry with the oldest
// stamp, and being stamped. Eviction and admission happen at Acquire, a
// safe point: a slot with a lease on it is never a victim. Misses not
// admitted stream through the working bank and are dropped at Done.
type Streamed struct {
	cfg     *config.Config
	opts    StreamOptions
	files   []*native.DirectFile
	pool    *native.ReadPool
	layers  []*layerCache
	byLayer map[int]*layerCache
	classes []*slotClass

	mu        sync.Mutex
	clock     uint64
	forwards  int
	freed     chan struct{} // closed and replaced whenever a working slot frees
	tel       telemetry
	usage     *Usage
	slabBytes int64 // every slab allocated
	closed    bool

	// Test hooks (see export_test.go).
	poison     bool
	fault      atomic.Pointer[func(n int64) error]
	footprint  func() (uint64, error)
	reads      atomic.Int64
	violations atomic.Int64
}

// layerCache is one expert layer's tiers.
type layerCache struct {
	layer   int
	row     int // row in the expert map
	class   *slotClass
	layouts []*layout // by expert id
	pinned  map[int]*slot
	lru     map[int]*slot // expert id -> LRU slot (reading or ready)
	slots   []*slot       // every LRU slot, empty ones included
	cap     int
}

// slotClass is one slab size and its working bank.
type slotClass struct {
	name string
	size int64
	free []*slot // working bank slots not in use
	all  int
}

type tier uint8

const (
	tierWorking tier = iota
	tierLRU
	tierPinned
)

type slotState uint8

const (
	slotEmpty slotState = iota
	slotReading
	slotReady
)

// slot is one slab and what it holds. gen changes whenever the contents
// are invalidated, so a holder of (slot, gen) can tell its contents are
// gone.
type slot struct {
	slab   []byte
	class  *slotClass
	tier   tier
	state  slotState
	gen    uint64
	layer  int
	expert int
	ex     *Expert
	refs   int
	used   uint64
}

// NewStreamed builds the streamed tier for the expert layers of the model
// in c: it locates every expert, opens the shards for direct reads,
// allocates the slabs and loads the pinned experts.
func NewStreamed(ctx context.Context, c *container.Container, cfg *config.Config, layers []int, opts StreamOptions) (*Streamed, error) {
	if opts.CacheBytes < 0 || opts.ReadChunk < 0 || opts.PinnedBytes < 0 || opts.WorkingSlots < 0 || opts.Workers < 0 || opts.FootprintLimit < 0 || opts.GuardEvery < 0 {
		return nil, fmt.Errorf("experts: stream options must not be negative: %+v", opts)
	}
	if len(layers) == 0 {
		return nil, errors.New("experts: no expert layers to stream")
	}
	k := cfg.ExpertsPerToken
	if opts.WorkingSlots == 0 {
		opts.WorkingSlots = 2 * k
	}
	if opts.Workers == 0 {
		opts.Workers = 8
	}
	if opts.GuardEvery == 0 {
		opts.GuardEvery = 16
	}
	if opts.ReadChunk <= 0 {
		opts.ReadChunk = 4 << 20
	}
	opts.ReadChunk = (opts.ReadChunk + native.DirectAlign - 1) / native.DirectAlign * native.DirectAlign
	opts.PinnedBytes = min(opts.PinnedBytes, opts.CacheBytes)
	s := &Streamed{cfg: cfg, opts: opts, byLayer: map[int]*layerCache{}, freed: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if err := s.openFiles(c); err != nil {
		return nil, err
	}
	if err := s.locate(c, layers); err != nil {
		return nil, err
	}
	s.tel.init(len(layers), cfg.NumRoutedExperts)
	s.usage = NewUsage(cfg.NumLayers, cfg.NumRoutedExperts)
	if opts.UsagePath != "" {
		u, err := LoadUsage(opts.UsagePath, cfg.NumLayers, cfg.NumRoutedExperts)
		if err != nil {
			return nil, err
		}
		s.usage = u
	}
	if err := s.allocate(opts.WorkingSlots, k); err != nil {
		return nil, err
	}
	s.pool = native.NewReadPool(opts.Workers)
	if err := s.loadPins(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *Streamed) openFiles(c *container.Container) error {
	for _, sh := range c.Shards() {
		path := filepath.Join(c.Dir(), sh.Name)
		open := native.OpenDirect
		if s.opts.Buffered {
			open = native.OpenBuffered
		}
		f, err := open(path)
		if err != nil {
			return fmt.Errorf("experts: %w", err)
		}
		s.files = append(s.files, f)
	}
	return nil
}

// locate lays out every expert of every layer and sizes the classes.
func (s *Streamed) locate(c *container.Container, layers []int) error {
	fileIndex := map[string]int{}
	for i, sh := range c.Shards() {
		fileIndex[sh.Name] = i
	}
	main := &slotClass{name: "decoder"}
	mtp := &slotClass{name: "MTP"}
	for row, l := range layers {
		if _, dup := s.byLayer[l]; dup {
			return fmt.Errorf("experts: layer %d listed twice", l)
		}
		lc := &layerCache{layer: l, row: row, pinned: map[int]*slot{}, lru: map[int]*slot{}, class: main}
		if l == s.cfg.NumLayers {
			lc.class = mtp
		}
		lc.layouts = make([]*layout, s.cfg.NumRoutedExperts)
		for e := range lc.layouts {
			loc, err := c.Expert(l, e, s.cfg)
			if err != nil {
				return fmt.Errorf("experts: %w", err)
			}
			lo, err := newLayout(loc, fileIndex)
			if err != nil {
				return err
			}
			lc.layouts[e] = lo
			lc.class.size = max(lc.class.size, slabSize(lo.need))
		}
		s.layers = append(s.layers, lc)
		s.byLayer[l] = lc
	}
	for _, cl := range []*slotClass{main, mtp} {
		if cl.size > 0 {
			s.classes = append(s.classes, cl)
		}
	}
	return nil
}

// allocate maps the working bank and the LRU slots. The LRU gets, per
// layer, what the cache budget leaves after the pins.
func (s *Streamed) allocate(working, k int) error {
	for _, cl := range s.classes {
		n := working
		if cl.name == "MTP" {
			n = max(1, min(working, k))
		}
		for range n {
			sl, err := s.newSlot(cl, tierWorking)
			if err != nil {
				return err
			}
			cl.free = append(cl.free, sl)
			cl.all++
		}
	}
	var row int64
	for _, lc := range s.layers {
		row += lc.class.size
	}
	lruBytes := s.opts.CacheBytes - s.pinBytesPlanned()
	per := 0
	if row > 0 && lruBytes > 0 {
		per = int(min(lruBytes/row, int64(s.cfg.NumRoutedExperts)))
	}
	for _, lc := range s.layers {
		lc.cap = per
		for range per {
			sl, err := s.newSlot(lc.class, tierLRU)
			if err != nil {
				return err
			}
			sl.layer = lc.layer
			lc.slots = append(lc.slots, sl)
		}
	}
	return nil
}

func (s *Streamed) newSlot(cl *slotClass, t tier) (*slot, error) {
	b, err := native.AllocAligned(int(cl.size), slabAlign)
	if err != nil {
		return nil, fmt.Errorf("experts: allocating a %s expert slab of %d bytes: %w", cl.name, cl.size, err)
	}
	s.slabBytes += cl.size
	return &slot{slab: b, class: cl, tier: t, layer: -1, expert: -1}, nil
}

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
		n += len(s.byLayer[r.Layer].layouts[r.Expert].chunks(s.opts.ReadChunk))
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

// Acquire implements Source.
func (s *Streamed) Acquire(ctx context.Context, layer int, ids []int) (Lease, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("experts: streamed source is closed")
	}
	lc, ok := s.byLayer[layer]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("experts: layer %d has no routed experts", layer)
	}
	seen := make([]bool, len(lc.layouts))
	for _, id := range ids {
		if id < 0 || id >= len(lc.layouts) {
			s.mu.Unlock()
			return nil, fmt.Errorf("experts: layer %d has no expert %d", layer, id)
		}
		if seen[id] {
			s.mu.Unlock()
			return nil, fmt.Errorf("experts: layer %d: expert %d requested twice", layer, id)
		}
		seen[id] = true
	}
	if layer == s.layers[0].layer {
		s.forwards++
		if s.opts.FootprintLimit > 0 && s.forwards%s.opts.GuardEvery == 0 {
			s.guardLocked()
		}
	}
	l := s.leaseLocked(ctx, lc, ids)
	reqs := l.startLocked()
	s.mu.Unlock()
	l.submitAsync(reqs)
	return l, nil
}

// leaseLocked applies the policy to one request: hits are leased and
// stamped, misses get LRU slots (evicting) or wait for working slots.
func (s *Streamed) leaseLocked(ctx context.Context, lc *layerCache, ids []int) *streamLease {
	l := &streamLease{s: s, lc: lc, ids: ids, items: make([]leaseItem, len(ids)), hitAtAcquire: make([]bool, len(ids))}
	l.ctx, l.cancel = context.WithCancel(ctx)
	nreads := 0
	var misses []int // indices into ids, ascending id
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return ids[a] - ids[b] })
	for _, i := range order {
		id := ids[i]
		it := &l.items[i]
		it.lc, it.id = lc, id
		s.usage.add(lc.layer, id)
		s.tel.routed(lc.row, id)
		if sl, ok := lc.pinned[id]; ok && sl.state == slotReady {
			sl.refs++
			it.slot, it.gen, it.state = sl, sl.gen, itemReady
			l.ready = append(l.ready, i)
			l.hitAtAcquire[i] = true
			s.tel.hit(lc.row, true)
			continue
		}
		if sl, ok := lc.lru[id]; ok && sl.state == slotReady {
			sl.refs++
			s.clock++
			sl.used = s.clock
			it.slot, it.gen, it.state = sl, sl.gen, itemReady
			l.ready = append(l.ready, i)
			l.hitAtAcquire[i] = true
			s.tel.hit(lc.row, false)
			continue
		}
		s.tel.miss(lc.row)
		misses = append(misses, i)
		nreads += len(lc.layouts[id].chunks(s.opts.ReadChunk))
	}
	l.events = make(chan readEvent, nreads)
	// Admit the last misses into LRU slots nobody holds.
	free := 0
	for _, sl := range lc.slots {
		if sl.refs == 0 {
			free++
		}
	}
	admit := min(free, len(misses))
	for j, i := range misses {
		if j < len(misses)-admit {
			l.pending = append(l.pending, i)
			continue
		}
		sl := lc.victim()
		s.invalidate(sl)
		id := ids[i]
		if old, ok := lc.lru[id]; ok && old != sl {
			// A slot still reading this expert for another lease: that
			// lease keeps it; this one reads its own copy.
			delete(lc.lru, id)
		}
		s.clock++
		sl.used = s.clock
		sl.expert, sl.state, sl.refs = id, slotReading, 1
		lc.lru[id] = sl
		l.items[i].slot, l.items[i].gen, l.items[i].state = sl, sl.gen, itemQueued
	}
	return l
}

// victim picks the LRU slot an admitted miss takes: the first empty slot,
// else the unleased one with the oldest stamp.
func (lc *layerCache) victim() *slot {
	var best *slot
	for _, sl := range lc.slots {
		if sl.refs != 0 {
			continue
		}
		if sl.state == slotEmpty {
			return sl
		}
		if best == nil || sl.used < best.used {
			best = sl
		}
	}
	return best
}

// invalidate drops a slot's contents: its expert leaves the tier maps, its
// generation changes, and with poisoning on the slab is overwritten.
func (s *Streamed) invalidate(sl *slot) {
	if sl.state != slotEmpty && sl.expert >= 0 {
		lc := s.byLayer[sl.layer]
		if sl.tier == tierLRU && lc != nil && lc.lru[sl.expert] == sl {
			delete(lc.lru, sl.expert)
		}
	}
	sl.gen++
	sl.state, sl.ex, sl.expert = slotEmpty, nil, -1
	if sl.tier == tierWorking {
		sl.layer = -1
	}
	if s.poison {
		poisonSlab(sl.slab)
	}
}

// poisonSlab fills a slab with 0xFF bytes: int4/int8 weights of -1 and
// NaN scales, so a stale read shows up in the results.
func poisonSlab(b []byte) {
	for i := range b {
		b[i] = 0xFF
	}
}

// releaseWorking returns a working slot to its bank and wakes waiters.
func (s *Streamed) releaseWorking(sl *slot) {
	s.invalidate(sl)
	sl.class.free = append(sl.class.free, sl)
	close(s.freed)
	s.freed = make(chan struct{})
}

// guardLocked samples the footprint and, above the limit, shrinks every
// layer's LRU by one unleased slot, freeing its slab.
func (s *Streamed) guardLocked() {
	sample := s.footprint
	if sample == nil {
		sample = func() (uint64, error) {
			f, err := native.Footprint()
			return f.Footprint, err
		}
	}
	fp, err := sample()
	if err != nil || fp <= uint64(s.opts.FootprintLimit) {
		return
	}
	for _, lc := range s.layers {
		sl := lc.victim()
		if sl == nil {
			continue
		}
		s.invalidate(sl)
		lc.slots = slices.DeleteFunc(lc.slots, func(x *slot) bool { return x == sl })
		lc.cap = len(lc.slots)
		s.slabBytes -= int64(len(sl.slab))
		native.Free(sl.slab)
		sl.slab = nil
		s.tel.shrinks++
	}
}

// Close stops the read pool, saves the usage history and frees every
// slab. Leases must have been released.
func (s *Streamed) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	var errs []error
	if s.pool != nil {
		errs = append(errs, s.pool.Close())
	}
	if s.opts.UsagePath != "" && s.usage != nil {
		errs = append(errs, s.usage.Save(s.opts.UsagePath))
	}
	free := func(sl *slot) {
		if sl.slab != nil {
			errs = append(errs, native.Free(sl.slab))
			sl.slab = nil
		}
	}
	for _, cl := range s.classes {
		for _, sl := range cl.free {
			free(sl)
		}
	}
	for _, lc := range s.layers {
		for _, sl := range lc.slots {
			free(sl)
		}
		for _, sl := range lc.pinned {
			free(sl)
		}
	}
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// SaveUsage writes the usage history to UsagePath (atomically); it does
// nothing without one.
func (s *Streamed) SaveUsage() error {
	if s.opts.UsagePath == "" {
		return nil
	}
	s.mu.Lock()
	u := s.usage.clone()
	s.mu.Unlock()
	return u.Save(s.opts.UsagePath)
}

// Files returns the paths of the shards the source reads.
func (s *Streamed) Files() []string {
	out := make([]string, len(s.files))
	for i, f := range s.files {
		out[i] = f.Path()
	}
	return out
}

// SlotRowBytes is the slab memory of one LRU slot in every expert layer:
// the granule CacheBytes is divided by.
func (s *Streamed) SlotRowBytes() int64 {
	var n int64
	for _, lc := range s.layers {
		n += lc.class.size
	}
	return n
}

// Direct reports whether every shard is read with direct I/O (the page
// cache bypassed).
func (s *Streamed) Direct() bool {
	for _, f := range s.files {
		if !f.Direct() {
			return false
		}
	}
	return len(s.files) > 0
}
