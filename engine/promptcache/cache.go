package promptcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/native/diskio"
	"github.com/spoolhq/spool/native/offheap"
	"github.com/spoolhq/spool/native/sysinfo"
)

// DefaultBlockTokens is the block size: 16 tokens, as vLLM's automatic
// prefix caching. A hit recomputes at most 15 prompt tokens, and on a
// machine that streams experts every token forwarded costs reads (16 tokens
// touch about 40% of a layer's 256 experts, 64 tokens about 87%); yet a
// block of GLM-5.2's state is still 3 MiB, past the size at which direct
// reads reach the disk's bandwidth, and a 23k-token prompt is only 1,440
// blocks to hash and index.
const DefaultBlockTokens = 16

// Defaults of Options.
const (
	DefaultMinFreeBytes int64 = 1 << 30
	DefaultSpillIdle          = 2 * time.Second
	// minBacklogBytes is the smallest default backlog of evicted blocks
	// waiting to be written.
	minBacklogBytes int64 = 64 << 20
	// readAhead is the number of block files a restore reads at once (and
	// the number of aligned read slabs the cache keeps).
	readAhead = 2
	// ownReadWorkers is the size of the read pool a cache starts when it
	// is not given one.
	ownReadWorkers = 2
	// fullBackoff is how long writes pause after the disk was found full.
	fullBackoff = 30 * time.Second
)

// Options configure a Cache. Zero fields take the defaults.
type Options struct {
	// Identity is the model the cache serves (see IdentityOf).
	Identity Identity
	// BlockTokens is the block size (DefaultBlockTokens).
	BlockTokens int
	// MemoryBytes caps the memory tier; 0 keeps no blocks in memory
	// (blocks go straight to disk).
	MemoryBytes int64
	// Dir is the disk tier's directory (see DefaultDir); "" keeps no disk
	// tier. It is created if needed; one process at a time uses it.
	Dir string
	// DiskBytes caps the disk tier (required with Dir; see
	// DefaultDiskBytes). Every block file in Dir counts, those of other
	// models too, and the least recently used go first.
	DiskBytes int64
	// MinFreeBytes is the free space the disk tier leaves on its volume
	// (DefaultMinFreeBytes; negative: none).
	MinFreeBytes int64
	// BacklogBytes bounds the blocks evicted from memory and waiting to be
	// written (default: 64 MiB or four blocks, whichever is more; an empty
	// backlog takes one block of any size). Store waits for room rather
	// than drop them.
	BacklogBytes int64
	// SpillIdle is how long the cache must be idle (no Lookup, Restore or
	// Store) before the blocks only in memory are written to disk
	// (DefaultSpillIdle).
	SpillIdle time.Duration
	// Pool is the direct-read pool restores read through (the expert
	// tier's, so both share the disk's queue); nil starts a small one.
	Pool *diskio.ReadPool
	// FS is the file system writes go through (OS).
	FS FS
	// Logger receives a line for every block file ignored and deleted and
	// for disk tier trouble (slog.Default()).
	Logger *slog.Logger
}

// DefaultDir is the disk tier's default directory: Spool/prompt-cache in the
// user's cache directory (~/Library/Caches on macOS, $XDG_CACHE_HOME or
// ~/.cache on Linux).
func DefaultDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("promptcache: no user cache directory: %w", err)
	}
	return filepath.Join(dir, "Spool", "prompt-cache"), nil
}

// DefaultDiskBytes is the default disk tier cap for dir: a tenth of its
// volume, between 1 GiB and 64 GiB.
func DefaultDiskBytes(dir string) int64 {
	const lo, hi = 1 << 30, 64 << 30
	sp, err := sysinfo.DiskFree(dir)
	if err != nil {
		return lo
	}
	return min(max(int64(sp.Total/10), lo), hi)
}

// Cache is a prefix cache of sequence state, in token blocks keyed by chain
// hashes, over a memory tier and a disk tier. Its methods are safe for
// concurrent use; Close stops it.
type Cache struct {
	opts Options
	geo  kvcache.Geometry
	root Hash // identity digest: the chain's root and every file's identity
	bt   int  // block tokens
	log  *slog.Logger

	mu      sync.Mutex
	changed *sync.Cond // the backlog shrank, or the cache closed
	closing bool
	op      uint64 // counts chain operations (LRU placement)
	active  time.Time
	mem     memTier
	disk    *diskTier // nil without a disk tier
	st      Stats

	pool     *diskio.ReadPool
	ownPool  bool
	slabs    chan []byte // aligned read slabs, allocated on first use
	slabSize int64

	wake chan struct{} // capacity 1: the writer has work
	done chan struct{} // closed when the writer has exited
}

// New opens a cache. A disk tier that cannot be used (its directory cannot
// be created, or another process holds it) is turned off with a log line;
// the memory tier still works, and Stats says why.
func New(opts Options) (*Cache, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cache{
		opts: o,
		geo:  o.Identity.Geometry,
		root: o.Identity.digest(o.BlockTokens),
		bt:   o.BlockTokens,
		log:  o.Logger,
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
		mem:  newMemTier(o.MemoryBytes, o.BacklogBytes),
	}
	c.changed = sync.NewCond(&c.mu)
	c.st.BlockTokens = o.BlockTokens
	c.active = time.Now()
	if o.Dir != "" {
		c.disk, err = openDisk(o, c.root, c.fileSizes(), c.log)
		if err == nil {
			c.st.Invalid += c.disk.invalidAtOpen
		} else {
			c.st.DiskOff = err.Error()
			c.log.Warn("prompt cache: the disk tier is off", "dir", o.Dir, "reason", err)
			c.disk = nil
		}
	}
	if c.disk == nil {
		close(c.done)
		return c, nil
	}
	c.pool = o.Pool
	if c.pool == nil {
		c.pool, c.ownPool = diskio.NewReadPool(ownReadWorkers), true
	}
	c.slabSize = diskio.SlabLen(c.maxFileSize())
	c.slabs = make(chan []byte, readAhead)
	for range readAhead {
		c.slabs <- nil // allocated on first use
	}
	go c.writer()
	return c, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.BlockTokens == 0 {
		o.BlockTokens = DefaultBlockTokens
	}
	g := o.Identity.Geometry
	switch {
	case o.BlockTokens < 1 || o.BlockTokens > maxFileTokens:
		return o, fmt.Errorf("promptcache: block size %d is out of range (1..%d)", o.BlockTokens, maxFileTokens)
	case g.Layers <= 0 || g.KVLora <= 0 || g.Rope < 0 || g.IndexDim < 0:
		return o, fmt.Errorf("promptcache: identity has no valid geometry (%d layers, latent %d)", g.Layers, g.KVLora)
	case o.Identity.Hidden <= 0:
		return o, errors.New("promptcache: the identity needs the model's hidden size")
	case o.MemoryBytes < 0:
		return o, fmt.Errorf("promptcache: memory cap %d is negative", o.MemoryBytes)
	case o.Dir != "" && o.DiskBytes <= 0:
		return o, fmt.Errorf("promptcache: the disk tier in %s needs a positive cap, got %d", o.Dir, o.DiskBytes)
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes
	}
	o.MinFreeBytes = max(o.MinFreeBytes, 0)
	if o.SpillIdle <= 0 {
		o.SpillIdle = DefaultSpillIdle
	}
	if o.FS == nil {
		o.FS = OS{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.BacklogBytes <= 0 {
		one := fileSize(o.BlockTokens, g.BlockFloats(o.BlockTokens, 2*o.BlockTokens, true), o.Identity.Hidden)
		o.BacklogBytes = max(minBacklogBytes, 4*one)
	}
	return o, nil
}

// BlockTokens is the block size.
func (c *Cache) BlockTokens() int { return c.bt }

// Footprint is the memory a cache with these options holds at most, for the
// memory plan (plan.PromptCacheItems).
func Footprint(o Options) (plan.PromptCacheMemory, error) {
	o, err := o.withDefaults()
	if err != nil {
		return plan.PromptCacheMemory{}, err
	}
	c := &Cache{opts: o, geo: o.Identity.Geometry, bt: o.BlockTokens}
	m := plan.PromptCacheMemory{
		TierBytes:   o.MemoryBytes,
		BlockTokens: o.BlockTokens,
		BlockBytes:  c.maxFileSize(),
	}
	if o.Dir != "" {
		// The backlog takes a block past its bound when empty, and a block
		// evicted while the writer writes it.
		blk := c.maxBlockMem()
		m.BacklogBytes = max(o.BacklogBytes, blk) + blk
		m.ReadBuffers = readAhead
		// A read slab, and the block decoded from it.
		m.ReadBufferBytes = diskio.SlabLen(c.maxFileSize()) + c.maxFileSize()
		m.WriteBufferBytes = c.maxFileSize()
	}
	return m, nil
}

// fileSizes lists the sizes a block file of this cache may have: without
// MTP rows, with them for the first block, with them for the others.
func (c *Cache) fileSizes() [3]int64 {
	g, B, H := c.geo, c.bt, c.opts.Identity.Hidden
	return [3]int64{
		fileSize(B, g.BlockFloats(0, B, false), 0),
		fileSize(B, g.BlockFloats(0, B, true), H),
		fileSize(B, g.BlockFloats(B, 2*B, true), H),
	}
}

// maxBlockMem is the most memory one block holds (memBytes).
func (c *Cache) maxBlockMem() int64 {
	g, B := c.geo, c.bt
	return (&block{tokens: make([]int, B), data: make([]float32, g.BlockFloats(B, 2*B, true)), hidden: make([]float32, c.opts.Identity.Hidden)}).memBytes()
}

// maxFileSize is the largest block file: one with MTP state, which a run
// with MTP may have written even when this one has none.
func (c *Cache) maxFileSize() int64 {
	s := c.fileSizes()
	return max(s[0], s[1], s[2])
}

// Close writes every block held only in memory to disk, stops the writer
// and releases the directory. The cache keeps answering, with nothing.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.done
		return nil
	}
	c.closing = true
	c.changed.Broadcast()
	c.mu.Unlock()
	c.signal()
	<-c.done
	var err error
	if c.disk != nil {
		err = c.disk.close()
		if c.ownPool {
			c.pool.Close()
		}
		for range readAhead {
			if s := <-c.slabs; s != nil {
				err = errors.Join(err, offheap.Free(s))
			}
		}
	}
	c.mu.Lock()
	c.mem.clear()
	c.mu.Unlock()
	return err
}

// Flush writes every block held only in memory to disk now and waits until
// it is written (or ctx ends). Without a disk tier it does nothing.
func (c *Cache) Flush(ctx context.Context) error {
	if c.disk == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mem.flushing++
	defer func() { c.mem.flushing-- }()
	c.signal()
	for c.mem.unwritten.Len() > 0 || len(c.mem.backlog) > 0 || c.mem.writing > 0 {
		if c.closing {
			return errors.New("promptcache: flush: the cache is closing")
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("promptcache: flush: %w", err)
		}
		if c.disk.paused(time.Now()) {
			return errors.New("promptcache: flush: the disk tier is paused (disk full or failing)")
		}
		c.changed.Wait()
	}
	return nil
}

// signal wakes the writer.
func (c *Cache) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// touchActive records activity (the writer waits for idleness); c.mu held.
func (c *Cache) touchActive() { c.active = time.Now() }

// Stats returns the cache's counters and sizes.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.st
	s.Memory.Blocks = len(c.mem.blocks) + len(c.mem.backlog)
	s.Memory.Bytes = c.mem.used + c.mem.backlogBytes
	s.Memory.CapBytes = c.mem.max
	if c.disk != nil {
		s.DiskDir = c.disk.root
		s.Disk.Blocks = len(c.disk.files)
		s.Disk.Bytes = c.disk.used
		s.Disk.CapBytes = c.disk.max
		s.Disk.OtherBytes = c.disk.otherBytes
	}
	return s
}
