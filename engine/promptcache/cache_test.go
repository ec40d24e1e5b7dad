package promptcache

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/kvcache"
)

const testBlock = 4

func memOptions(name string) Options {
	return Options{Identity: testIdentity(name), BlockTokens: testBlock, MemoryBytes: 64 << 20}
}

func diskOptions(t testing.TB, name string) Options {
	o := memOptions(name)
	o.Dir = t.TempDir()
	o.DiskBytes = 64 << 20
	o.MinFreeBytes = -1
	o.Logger, _ = newLogger()
	return o
}

// restoreAll looks up prompt and restores it into a fresh sequence.
func restoreAll(t testing.TB, c *Cache, prompt []int) (*kvcache.Sequence, Match, Restored) {
	t.Helper()
	m := c.Lookup(prompt)
	seq := kvcache.New(testGeo, 4096)
	r, err := c.Restore(context.Background(), seq, m)
	if err != nil {
		t.Fatal(err)
	}
	return seq, m, r
}

func TestStoreRestoreFromMemory(t *testing.T) {
	c := mustNew(t, memOptions("mem"))
	prompt := promptOf(50, 1)
	src, hidden := filled(t, prompt)
	st := c.Store(context.Background(), src, hidden)
	if st.Blocks != 12 || st.Tokens != 48 {
		t.Fatalf("stored %+v, want 12 blocks of 48 tokens", st)
	}
	if again := c.Store(context.Background(), src, hidden); again.Blocks != 0 {
		t.Fatalf("storing again added %+v", again)
	}
	// The next turn: the prompt plus more tokens.
	next := append(slices.Clone(prompt), 7, 8, 9)
	seq, m, r := restoreAll(t, c, next)
	if m.Tokens != 48 || m.Memory != 48 || m.Disk != 0 {
		t.Fatalf("match %+v", m)
	}
	if r.Tokens != 48 || r.Added != 48 || r.FromMemory != 48 || !r.MTP || !slices.Equal(r.Hidden, hidden.Rows[47]) {
		t.Fatalf("restored %+v", r)
	}
	sameState(t, seq, src, 48)
	s := c.Stats()
	if s.Hits != 1 || s.HitTokens != 48 || s.Memory.HitTokens != 48 || s.StoredTokens != 48 || s.Lookups != 1 || s.Memory.Blocks != 12 {
		t.Errorf("stats %+v", s)
	}
}

// TestLookupLeavesOneToken: a prompt wholly in the cache still leaves a
// token to forward.
func TestLookupLeavesOneToken(t *testing.T) {
	c := mustNew(t, memOptions("one"))
	prompt := promptOf(48, 2)
	src, hidden := filled(t, prompt)
	c.Store(context.Background(), src, hidden)
	if m := c.Lookup(prompt); m.Tokens != 44 {
		t.Fatalf("a 48-token prompt matched %d tokens, want 44", m.Tokens)
	}
	if m := c.Lookup(prompt[:1]); m.Tokens != 0 {
		t.Fatalf("a one-token prompt matched %d", m.Tokens)
	}
	if m := c.Lookup(nil); m.Tokens != 0 {
		t.Fatalf("an empty prompt matched %d", m.Tokens)
	}
	other := slices.Clone(prompt)
	other[9]++
	if m := c.Lookup(other); m.Tokens != 8 {
		t.Fatalf("a prompt differing at token 9 matched %d tokens, want 8", m.Tokens)
	}
}

// TestRestoreIntoPrefix: a sequence that holds part of the prompt (an idle
// sequence) takes the rest of the cached blocks.
func TestRestoreIntoPrefix(t *testing.T) {
	c := mustNew(t, memOptions("prefix"))
	prompt := promptOf(50, 3)
	src, hidden := filled(t, prompt)
	c.Store(context.Background(), src, hidden)
	seq := kvcache.New(testGeo, 4096)
	fill(t, seq, prompt[:10])
	r, err := c.Restore(context.Background(), seq, c.Lookup(prompt))
	if err != nil {
		t.Fatal(err)
	}
	if r.Tokens != 48 || r.Added != 38 || !r.MTP {
		t.Fatalf("restored %+v", r)
	}
	sameState(t, seq, src, 48)

	wrong := kvcache.New(testGeo, 4096)
	fill(t, wrong, promptOf(10, 4))
	if _, err := c.Restore(context.Background(), wrong, c.Lookup(prompt)); err == nil {
		t.Fatal("restored into a sequence holding other tokens")
	}
}

// TestMTPState: blocks stored without hidden states carry no MTP rows, a
// later Store with them upgrades the blocks, and a sequence without an MTP
// cache takes blocks that have one.
func TestMTPState(t *testing.T) {
	c := mustNew(t, memOptions("mtp"))
	prompt := promptOf(33, 5)
	src, hidden := filled(t, prompt)
	c.Store(context.Background(), src, Hidden{})
	seq, _, r := restoreAll(t, c, prompt)
	if r.Tokens != 32 || r.MTP || seq.MTP().Len() != 0 {
		t.Fatalf("blocks without MTP state restored %+v, MTP rows %d", r, seq.MTP().Len())
	}
	// Hidden states of only the second half: the first blocks stay without.
	c.Store(context.Background(), src, Hidden{From: 16, Rows: hidden.Rows[16:]})
	_, _, r = restoreAll(t, c, prompt)
	if r.MTP {
		t.Fatal("MTP aligned across blocks lacking MTP rows")
	}
	if st := c.Store(context.Background(), src, hidden); st.Blocks != 0 {
		t.Fatalf("upgrading counted %d new blocks", st.Blocks)
	}
	seq, _, r = restoreAll(t, c, prompt)
	if !r.MTP {
		t.Fatalf("upgraded blocks restored %+v", r)
	}
	sameState(t, seq, src, 32)

	plain := testGeo
	plain.MTP = false
	noMTP := kvcache.New(plain, 4096)
	r, err := c.Restore(context.Background(), noMTP, c.Lookup(prompt))
	if err != nil || r.Tokens != 32 || r.MTP || noMTP.MTP().Len() != 0 {
		t.Fatalf("sequence without MTP: %+v, %v", r, err)
	}
}

func TestRestoreFromDiskAfterRestart(t *testing.T) {
	o := diskOptions(t, "disk")
	prompt := promptOf(50, 6)
	src, hidden := filled(t, prompt)
	c := mustNew(t, o)
	c.Store(context.Background(), src, hidden)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(blockFiles(t, o.Dir)); n != 12 {
		t.Fatalf("%d block files after close, want 12", n)
	}

	for _, mem := range []int64{0, 64 << 20} {
		o.MemoryBytes = mem
		c := mustNew(t, o)
		seq, m, r := restoreAll(t, c, prompt)
		if m.Disk != 48 || r.FromDisk != 48 || !r.MTP || r.ReadBytes < 12*fileSize(4, testGeo.BlockFloats(4, 8, true), testHidden) {
			t.Fatalf("memory %d: match %+v, restored %+v", mem, m, r)
		}
		sameState(t, seq, src, 48)
		s := c.Stats()
		if s.Disk.HitTokens != 48 || s.Disk.ReadBytes != r.ReadBytes || s.Disk.Blocks != 12 {
			t.Errorf("stats %+v", s)
		}
		if mem > 0 {
			// Read from disk once, the blocks now come from memory.
			if _, m, _ := restoreAll(t, c, prompt); m.Memory != 48 {
				t.Errorf("after a disk hit the memory tier holds %d tokens, want 48", m.Memory)
			}
		}
		c.Close()
	}
}

// TestIdleSpill: blocks reach the disk once the cache is idle, without a
// Close; a second cache cannot take the directory and runs memory-only.
func TestIdleSpill(t *testing.T) {
	o := diskOptions(t, "idle")
	o.SpillIdle = 20 * time.Millisecond
	c := mustNew(t, o)
	src, hidden := filled(t, promptOf(20, 7))
	c.Store(context.Background(), src, hidden)
	deadline := time.Now().Add(10 * time.Second)
	for len(blockFiles(t, o.Dir)) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d block files after idling", len(blockFiles(t, o.Dir)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	second := mustNew(t, o)
	if s := second.Stats(); s.DiskOff == "" || s.DiskDir != "" {
		t.Errorf("a second cache on the same directory: %+v", s)
	}
	second.Store(context.Background(), src, hidden)
	if _, _, r := restoreAll(t, second, promptOf(20, 7)); r.Tokens != 16 {
		t.Errorf("the memory-only cache restored %d tokens", r.Tokens)
	}
}

// TestEvictionKeepsHeads: a prefix longer than the memory tier keeps its
// first blocks in memory; the rest go to disk and come back from there.
func TestEvictionKeepsHeads(t *testing.T) {
	o := diskOptions(t, "heads")
	prompt := promptOf(101, 8)
	src, hidden := filled(t, prompt)
	blk := (&block{data: make([]float32, testGeo.BlockFloats(4, 8, true)), hidden: make([]float32, testHidden), tokens: make([]int, 4)}).memBytes()
	o.MemoryBytes = 10 * blk
	c := mustNew(t, o)
	old, oldHidden := filled(t, promptOf(41, 9))
	c.Store(context.Background(), old, oldHidden)
	c.Store(context.Background(), src, hidden)
	m := c.Lookup(prompt)
	if m.Tokens != 100 {
		t.Fatalf("matched %d tokens", m.Tokens)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	m = c.Lookup(prompt)
	t.Logf("after the flush: %d tokens, %d in memory, %d on disk", m.Tokens, m.Memory, m.Disk)
	if m.Memory < 9*testBlock || m.Tokens != 100 {
		t.Fatalf("after the flush: %+v (want the first 9-10 blocks in memory)", m)
	}
	if om := c.Lookup(promptOf(41, 9)); om.Memory != 0 || om.Disk != 40 {
		t.Errorf("the older prefix: %+v, want it all on disk", om)
	}
	seq, _, r := restoreAll(t, c, prompt)
	if r.FromMemory != m.Memory || r.FromDisk != 100-m.Memory {
		t.Errorf("restored %+v", r)
	}
	sameState(t, seq, src, 100)
	if s := c.Stats(); s.Memory.Evictions == 0 || s.Memory.Bytes > o.MemoryBytes+c.opts.BacklogBytes {
		t.Errorf("stats %+v", s)
	}
}

// TestConcurrentUse: requests from several goroutines share prefixes
// through both tiers; every restore is exact.
func TestConcurrentUse(t *testing.T) {
	o := diskOptions(t, "concurrent")
	o.MemoryBytes = 50 << 10 // about 40 blocks
	o.DiskBytes = 400 << 10  // about 100 files
	o.SpillIdle = time.Millisecond
	c := mustNew(t, o)
	ctx := context.Background()
	shared := promptOf(37, 10)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			errs <- func() error {
				for i := range 30 {
					prompt := append(slices.Clone(shared), promptOf(5+(g*7+i)%40, 100+g*31+i%5)...)
					m := c.Lookup(prompt)
					seq := kvcache.New(testGeo, 4096)
					r, err := c.Restore(ctx, seq, m)
					if err != nil {
						return err
					}
					want, hidden := filled(t, prompt)
					if r.Tokens > 0 {
						n := seq.Len()
						if !slices.Equal(seq.Layer(2).KV(0, n, nil), want.Layer(2).KV(0, n, nil)) ||
							!slices.Equal(seq.Layer(0).Index(0, n, nil), want.Layer(0).Index(0, n, nil)) {
							return errors.New("restored state differs")
						}
						if r.MTP && !slices.Equal(r.Hidden, hidden.Rows[r.Tokens-1]) {
							return errors.New("restored hidden state differs")
						}
					}
					fill(t, seq, prompt[seq.Len():])
					c.Store(ctx, seq, hidden)
					if i%10 == 0 {
						c.Stats()
					}
				}
				return nil
			}()
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	t.Logf("stats %+v", s)
	// Whether a goroutine met its prefix on disk depends on the
	// interleaving; the disk tier's share is checked after a restart below.
	if s.Hits == 0 || s.Disk.Evictions == 0 || s.Disk.Bytes > o.DiskBytes || s.Invalid != 0 || s.WriteErrors != 0 {
		t.Errorf("stats %+v", s)
	}
	if u := diskUsage(o.Dir); u > o.DiskBytes {
		t.Errorf("disk usage %d exceeds the cap %d", u, o.DiskBytes)
	}
	c.Close()
	// After a restart with no memory tier, the shared prefix comes from disk
	// and is exact.
	o.MemoryBytes = 0
	d := mustNew(t, o)
	seq, _, r := restoreAll(t, d, append(slices.Clone(shared), promptOf(5, 100)...))
	want, _ := filled(t, append(slices.Clone(shared), promptOf(5, 100)...))
	if r.FromDisk == 0 || !slices.Equal(seq.Layer(2).KV(0, seq.Len(), nil), want.Layer(2).KV(0, seq.Len(), nil)) {
		t.Errorf("after a restart: restored %+v from disk", r)
	}
}

func TestOptionsRefused(t *testing.T) {
	bad := map[string]Options{
		"no geometry":         {},
		"block size":          {Identity: testIdentity("x"), BlockTokens: -1},
		"negative memory":     {Identity: testIdentity("x"), MemoryBytes: -1},
		"disk without cap":    {Identity: testIdentity("x"), Dir: t.TempDir()},
		"MTP without hidden":  {Identity: Identity{Geometry: testGeo}},
		"block size too big":  {Identity: testIdentity("x"), BlockTokens: 1 << 20},
		"negative disk cap":   {Identity: testIdentity("x"), Dir: t.TempDir(), DiskBytes: -5},
		"geometry without KV": {Identity: Identity{Geometry: kvcache.Geometry{Layers: 2}, Hidden: 4}},
	}
	for name, o := range bad {
		if c, err := New(o); err == nil {
			c.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestFootprint: the plan's numbers bound what the cache holds.
func TestFootprint(t *testing.T) {
	o := diskOptions(t, "footprint")
	o.MemoryBytes = 20 << 10
	fp, err := Footprint(o)
	if err != nil {
		t.Fatal(err)
	}
	one := fileSize(testBlock, testGeo.BlockFloats(4, 8, true), testHidden)
	blk := (&block{data: make([]float32, testGeo.BlockFloats(4, 8, true)), hidden: make([]float32, testHidden), tokens: make([]int, 4)}).memBytes()
	if fp.TierBytes != o.MemoryBytes || fp.BacklogBytes != minBacklogBytes+blk || fp.ReadBuffers != readAhead ||
		fp.BlockBytes != one || fp.WriteBufferBytes != one || fp.BlockTokens != testBlock {
		t.Fatalf("footprint %+v", fp)
	}
	o.Dir = ""
	if fp, _ := Footprint(o); fp.BacklogBytes != 0 || fp.ReadBuffers != 0 {
		t.Errorf("memory-only footprint %+v", fp)
	}
	o.Dir = t.TempDir()
	c := mustNew(t, o)
	for i := range 20 {
		src, hidden := filled(t, promptOf(60, 200+i))
		c.Store(context.Background(), src, hidden)
		if s := c.Stats(); s.Memory.Bytes > fp.TierBytes+fp.BacklogBytes {
			t.Fatalf("memory tier holds %d bytes, the plan %d", s.Memory.Bytes, fp.TierBytes+fp.BacklogBytes)
		}
	}
}

// TestMTPOffReadsMTPBlocks: a run without the MTP layer shares the blocks a
// run with it wrote (the identity leaves MTP out), from disk too.
func TestMTPOffReadsMTPBlocks(t *testing.T) {
	o := diskOptions(t, "mtp off")
	prompt := promptOf(41, 80)
	src, hidden := filled(t, prompt)
	c := mustNew(t, o)
	c.Store(context.Background(), src, hidden)
	c.Close()

	plain := testGeo
	plain.MTP = false
	o.Identity.Geometry = plain
	o.MemoryBytes = 0
	c = mustNew(t, o)
	if sizes := c.fileSizes(); c.maxFileSize() < max(sizes[1], sizes[2]) {
		t.Fatalf("read slabs sized for %d bytes, an MTP block file has %d", c.maxFileSize(), max(sizes[1], sizes[2]))
	}
	seq := kvcache.New(plain, 4096)
	r, err := c.Restore(context.Background(), seq, c.Lookup(prompt))
	if err != nil || r.Tokens != 40 || r.FromDisk != 40 || r.MTP || c.Stats().Invalid != 0 {
		t.Fatalf("restored %+v, %v, stats %+v", r, err, c.Stats())
	}
	for l := range plain.Layers {
		if !slices.Equal(seq.Layer(l).KV(0, seq.Len(), nil), src.Layer(l).KV(0, 40, nil)) {
			t.Fatalf("layer %d differs", l)
		}
	}
}

// TestTinyBacklog: a backlog smaller than a block still passes blocks to
// the writer one at a time; Store waits, drops nothing.
func TestTinyBacklog(t *testing.T) {
	o := diskOptions(t, "tiny backlog")
	o.MemoryBytes = 0
	o.BacklogBytes = 1
	c := mustNew(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, hidden := filled(t, promptOf(81, 90))
	if st := c.Store(ctx, src, hidden); st.Blocks != 20 {
		t.Fatalf("stored %+v", st)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Dropped != 0 || s.Disk.Blocks != 20 {
		t.Errorf("stats %+v", s)
	}
}

// TestRestoreCancelled: a restore whose context ends leaves the sequence as
// it was and says so.
func TestRestoreCancelled(t *testing.T) {
	o := diskOptions(t, "cancel")
	prompt := promptOf(41, 95)
	src, hidden := filled(t, prompt)
	c := mustNew(t, o)
	c.Store(context.Background(), src, hidden)
	c.Close()
	o.MemoryBytes = 0
	c = mustNew(t, o)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	seq := kvcache.New(testGeo, 4096)
	fill(t, seq, prompt[:6])
	if _, err := c.Restore(ctx, seq, c.Lookup(prompt)); !errors.Is(err, context.Canceled) {
		t.Fatalf("restore with a cancelled context: %v", err)
	}
	if seq.Len() != 6 || seq.MTP().Len() != 5 {
		t.Fatalf("the sequence holds %d tokens and %d MTP rows after a cancelled restore", seq.Len(), seq.MTP().Len())
	}
	if r, err := c.Restore(context.Background(), seq, c.Lookup(prompt)); err != nil || r.Tokens != 40 {
		t.Fatalf("restore afterwards: %+v, %v", r, err)
	}
}
