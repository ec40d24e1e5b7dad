package experts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/native/diskio"
)

// Streamed is the streamed expert tier: routed experts live on disk and
// are read, on demand, into a fixed set of aligned slabs allocated once at
// startup — a working bank shared by all layers, per-layer LRU slots, and
// pinned slots. A forward's misses are all submitted to the read pool at
// Acquire; the lease hands out resident experts first and misses as their
// reads land.
//
// Policy (deterministic, per layer, a CachePolicy: LRUPolicy unless
// StreamOptions.Policy says otherwise): a hit in the LRU is reported to it
// in ascending id order; then the misses it admits (at most as many as
// there are slots this lease does not hold, the highest ids) take the
// slots it picks, in ascending id order; LRUPolicy gives an empty slot
// (lowest first) or else evicts the unleased entry with the oldest stamp.
// Eviction and admission happen at Acquire, a safe point: a slot with a
// lease on it is never a victim. Misses not admitted stream through the
// working bank and are dropped at Done.
type Streamed struct {
	cfg     *config.Config
	opts    StreamOptions
	files   []*diskio.DirectFile
	names   []string // files[i]'s path in the model's directory
	pool    *diskio.ReadPool
	layers  []*layerCache
	byLayer map[int]*layerCache
	classes []*slotClass

	mu        sync.Mutex
	forwards  int
	freed     chan struct{} // closed and replaced whenever a working slot frees
	tel       telemetry
	usage     *Usage
	slabBytes int64 // every slab allocated
	closed    bool
	packNotes []string
	damaged   map[string]int // pack path: records read from the shard instead
	bgSubmit  sync.WaitGroup // Prefetch's submitting goroutines
	repairs   sync.WaitGroup // Repairer calls
	// damagedExperts are the experts whose damage was logged.
	damagedExperts map[[2]int]bool
	// unchecked counts the extents that have no checksum to check.
	unchecked int

	// The decode pool: packed experts decode on at most DecodeWorkers
	// goroutines at once (decodeSlots), which Close waits for (decoding).
	decodeSlots chan struct{}
	decoding    sync.WaitGroup

	// lruPlanned is the LRU slots per layer the cache budget gives
	// (SetLRUShare's 100%, budget.go).
	lruPlanned int

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
	index   int // among the expert layers: its counters, its row of the expert map
	class   *slotClass
	layouts []*layout // by expert id
	pinned  map[int]*slot
	lru     map[int]*slot // expert id -> LRU slot (reading or ready)
	// ahead holds the read-aheads no Acquire claimed yet, by expert id.
	ahead  map[int]*fill
	heat   []heat  // by expert id: session use, for re-pinning
	spare  []*slot // empty pinned slots re-pinning may fill
	order  []int   // the next Acquire's read order hint (Order)
	slots  []*slot // every LRU slot, empty ones included
	cap    int
	policy CachePolicy // what the LRU slots keep
}

// NewStreamed builds the streamed tier for the expert layers of the model
// in c: it locates every expert, opens the shards for direct reads,
// allocates the slabs and loads the pinned experts.
func NewStreamed(ctx context.Context, c *container.Container, cfg *config.Config, layers []int, opts StreamOptions) (*Streamed, error) {
	if len(layers) == 0 {
		return nil, errors.New("experts: no expert layers to stream")
	}
	k := cfg.ExpertsPerToken
	if err := opts.normalize(k); err != nil {
		return nil, err
	}
	s := &Streamed{cfg: cfg, opts: opts, byLayer: map[int]*layerCache{}, freed: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.opts.UsagePath = "" // a tier that never ran writes no history
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
			s.setUsageAside(err)
		} else {
			s.usage = u
		}
	}
	if err := s.allocate(opts.WorkingSlots, k); err != nil {
		return nil, err
	}
	s.pool = diskio.NewReadPool(opts.Workers)
	s.decodeSlots = make(chan struct{}, opts.DecodeWorkers)
	if err := s.loadPins(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *Streamed) openFiles(c *container.Container) error {
	for _, sh := range c.Shards() {
		path := filepath.Join(c.Dir(), sh.Name)
		open := diskio.OpenDirect
		if s.opts.Buffered {
			open = diskio.OpenBuffered
		}
		f, err := open(path)
		if err != nil {
			return fmt.Errorf("experts: %w", err)
		}
		s.files = append(s.files, f)
		s.names = append(s.names, sh.Name)
	}
	return nil
}

// SaveUsage writes the usage history to UsagePath (atomically); it does
// nothing without one, or while the history is empty (a file is never
// overwritten with nothing).
func (s *Streamed) SaveUsage() error {
	if s.opts.UsagePath == "" {
		return nil
	}
	s.mu.Lock()
	u := s.usage.clone()
	s.mu.Unlock()
	if u.Total() == 0 {
		return nil
	}
	return u.Save(s.opts.UsagePath)
}

// setUsageAside handles a usage history that cannot be read (damaged, or
// another model's): it is renamed aside, keeping its bytes for a look, and
// the tier starts with no history, which it saves in its place. When it
// cannot be moved, the tier keeps no history rather than overwrite it.
func (s *Streamed) setUsageAside(why error) {
	path := s.opts.UsagePath
	aside := path + ".damaged"
	if _, err := os.Lstat(aside); err == nil {
		aside = fmt.Sprintf("%s.damaged-%s", path, time.Now().UTC().Format("20060102T150405.000000000"))
	}
	if err := os.Rename(path, aside); err != nil {
		s.logger().Warn("experts: the usage history cannot be read nor set aside; this run keeps none", "history", path, "err", why, "rename_err", err)
		s.opts.UsagePath = ""
		return
	}
	s.logger().Warn("experts: the usage history cannot be read; set aside, and a new one is learned", "history", path, "set_aside", aside, "err", why)
}

// Files returns the paths of the shards the source reads.
func (s *Streamed) Files() []string {
	out := make([]string, len(s.files))
	for i, f := range s.files {
		out[i] = f.Path()
	}
	return out
}

// SlotSetBytes is the slab memory of one LRU slot in every expert layer:
// the granule CacheBytes is divided by.
func (s *Streamed) SlotSetBytes() int64 {
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
