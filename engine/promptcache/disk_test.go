package promptcache

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// blockPath is the file of block k of prompt in a cache with options o.
func blockPath(o Options, prompt []int, k int) string {
	root := o.Identity.digest(o.BlockTokens)
	h := chainHashes(root, prompt, o.BlockTokens)[k]
	return filepath.Join(o.Dir, root.String()[:idDirLen], h.String()+blockExt)
}

// TestInvalidFilesIgnoredAndDeleted: a truncated file, flipped bytes,
// another model's identity, another block under this block's name: each is
// logged, deleted and never loaded; the restore keeps the blocks before it.
func TestInvalidFilesIgnoredAndDeleted(t *testing.T) {
	prompt := promptOf(50, 20)
	src, hidden := filled(t, prompt)
	const bad = 5 // the damaged block
	damage := map[string]func(t *testing.T, o Options, path string){
		"truncated": func(t *testing.T, o Options, path string) {
			info, _ := os.Stat(path)
			if err := os.Truncate(path, info.Size()-10); err != nil {
				t.Fatal(err)
			}
		},
		"flipped bytes": func(t *testing.T, o Options, path string) {
			raw, _ := os.ReadFile(path)
			raw[len(raw)/2] ^= 0x10
			raw[len(raw)/2+1] ^= 0x01
			os.WriteFile(path, raw, 0o644)
		},
		"another model": func(t *testing.T, o Options, path string) {
			raw, _ := os.ReadFile(path)
			_, b, err := parseBlock(raw)
			if err != nil {
				t.Fatal(err)
			}
			other := testIdentity("another model").digest(o.BlockTokens)
			os.WriteFile(path, encodeBlock(nil, other, b), 0o644)
		},
		"another block": func(t *testing.T, o Options, path string) {
			raw, _ := os.ReadFile(blockPath(o, prompt, bad+1))
			os.WriteFile(path, raw, 0o644)
		},
		"another format": func(t *testing.T, o Options, path string) {
			raw, _ := os.ReadFile(path)
			binary.LittleEndian.PutUint32(raw[8:], FormatVersion+1)
			os.WriteFile(path, raw, 0o644)
		},
	}
	for name, spoil := range damage {
		t.Run(name, func(t *testing.T) {
			o := diskOptions(t, "invalid")
			c := mustNew(t, o)
			c.Store(context.Background(), src, hidden)
			c.Close()
			path := blockPath(o, prompt, bad)
			spoil(t, o, path)

			logger, logs := newLogger()
			o.Logger = logger
			c = mustNew(t, o)
			seq, _, r := restoreAll(t, c, prompt)
			if r.Tokens != bad*testBlock {
				t.Fatalf("restored %d tokens, want the %d before the damaged block", r.Tokens, bad*testBlock)
			}
			sameState(t, seq, src, bad*testBlock)
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("the damaged file is still there: %v", err)
			}
			if n := logs.count("ignored and deleted an invalid block file"); n != 1 {
				t.Errorf("%d log lines about it:\n%s", n, logs)
			}
			if s := c.Stats(); s.Invalid != 1 {
				t.Errorf("stats count %d invalid files", s.Invalid)
			}
			t.Log(strings.TrimSpace(logs.String()))
			// Storing again mends the chain.
			c.Store(context.Background(), src, hidden)
			if _, _, r := restoreAll(t, c, prompt); r.Tokens != 48 {
				t.Errorf("after storing again: %d tokens", r.Tokens)
			}
		})
	}
}

// TestOtherModelsFiles: another identity's files are neither loaded nor
// deleted, but they count toward the cap and are evicted least recently
// used first.
func TestOtherModelsFiles(t *testing.T) {
	o := diskOptions(t, "model A")
	a := mustNew(t, o)
	srcA, hiddenA := filled(t, promptOf(41, 21))
	a.Store(context.Background(), srcA, hiddenA)
	a.Close()
	filesA := blockFiles(t, o.Dir)

	ob := o
	ob.Identity = testIdentity("model B")
	b := mustNew(t, ob)
	if m := b.Lookup(promptOf(41, 21)); m.Tokens != 0 {
		t.Fatalf("model B found model A's blocks: %+v", m)
	}
	s := b.Stats()
	if s.Disk.OtherBytes == 0 || s.Disk.Blocks != 0 || s.Invalid != 0 {
		t.Fatalf("stats %+v", s)
	}
	b.Close()
	if !slices.Equal(blockFiles(t, o.Dir), filesA) {
		t.Fatal("model B changed model A's files")
	}

	// A cap that holds about 10 files: B's blocks push A's out.
	ob.DiskBytes = 10 * allocSize(fileSize(testBlock, testGeo.BlockFloats(4, 8, true), testHidden))
	ob.MemoryBytes = 0
	b = mustNew(t, ob)
	srcB, hiddenB := filled(t, promptOf(41, 22))
	b.Store(context.Background(), srcB, hiddenB)
	b.Flush(context.Background())
	s = b.Stats()
	if s.Disk.OtherBytes != 0 || s.Disk.Bytes > ob.DiskBytes || s.Disk.Blocks != 10 {
		t.Errorf("stats %+v", s)
	}
	if u := diskUsage(o.Dir); u > ob.DiskBytes {
		t.Errorf("disk usage %d, cap %d", u, ob.DiskBytes)
	}
	// The head of the prompt is what stayed.
	if m := b.Lookup(promptOf(41, 22)); m.Disk != 40 {
		t.Errorf("match %+v", m)
	}
}

// watchFS measures the directory's usage after every change.
type watchFS struct {
	OS
	dir  string
	peak atomic.Int64
}

func (w *watchFS) measure() {
	if u := diskUsage(w.dir); u > w.peak.Load() {
		w.peak.Store(u)
	}
}

type watchFile struct {
	File
	w *watchFS
}

func (f watchFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.w.measure()
	return n, err
}

func (w *watchFS) CreateTemp(dir, pattern string) (File, error) {
	f, err := w.OS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	w.measure()
	return watchFile{f, w}, nil
}

func (w *watchFS) Rename(from, to string) error {
	err := w.OS.Rename(from, to)
	w.measure()
	return err
}

// TestDiskCapNeverExceeded: through every write and eviction, and when a
// restart finds a lower cap.
func TestDiskCapNeverExceeded(t *testing.T) {
	o := diskOptions(t, "cap")
	w := &watchFS{dir: o.Dir}
	o.FS = w
	o.MemoryBytes = 8 << 10
	o.DiskBytes = 25 * allocUnit
	o.SpillIdle = time.Millisecond
	c := mustNew(t, o)
	for i := range 30 {
		src, hidden := filled(t, promptOf(30+i, 30+i))
		c.Store(context.Background(), src, hidden)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	t.Logf("peak %d bytes, cap %d; stats %+v", w.peak.Load(), o.DiskBytes, s.Disk)
	if w.peak.Load() > o.DiskBytes || s.Disk.Bytes > o.DiskBytes || s.Disk.Evictions == 0 {
		t.Errorf("peak usage %d, counted %d, cap %d, %d evictions", w.peak.Load(), s.Disk.Bytes, o.DiskBytes, s.Disk.Evictions)
	}
	c.Close()

	o.DiskBytes = 10 * allocUnit
	c = mustNew(t, o)
	if u := diskUsage(o.Dir); u > o.DiskBytes || c.Stats().Disk.Bytes > o.DiskBytes {
		t.Errorf("after reopening with a lower cap: usage %d, cap %d", u, o.DiskBytes)
	}
	// The most recent prompt's head survived.
	if m := c.Lookup(promptOf(59, 59)); m.Disk < 4*testBlock {
		t.Errorf("the latest prompt kept %d tokens on disk", m.Disk)
	}
}

// faultFS fails writes once budget bytes have been written, as a full
// disk does (at write, or with delayed allocation at sync).
type faultFS struct {
	OS
	mu       sync.Mutex
	budget   int64
	atSync   bool
	avail    int64 // the volume's free space before the cache (0: ask the OS)
	dir      string
	failures int
}

type faultFile struct {
	File
	fs      *faultFS
	written int64
}

func (f *faultFS) CreateTemp(dir, pattern string) (File, error) {
	file, err := f.OS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) Available(dir string) (int64, error) {
	if f.avail > 0 {
		return f.avail - diskUsage(f.dir), nil
	}
	return f.OS.Available(dir)
}

func (f *faultFile) spend(n int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.budget < n {
		f.fs.failures++
		return &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	f.fs.budget -= n
	return nil
}

func (f *faultFile) Write(p []byte) (int, error) {
	f.written += int64(len(p))
	if !f.fs.atSync {
		if err := f.spend(int64(len(p))); err != nil {
			return 0, err
		}
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if f.fs.atSync {
		if err := f.spend(f.written); err != nil {
			return err
		}
	}
	return f.File.Sync()
}

// TestDiskFullLosesOnlyCache: a disk that fills up while blocks spill
// costs only those blocks: Store and Restore work on, the memory tier
// keeps serving, nothing half-written is left, and writes resume once
// there is room again.
func TestDiskFullLosesOnlyCache(t *testing.T) {
	for _, atSync := range []bool{false, true} {
		t.Run(map[bool]string{false: "at write", true: "at sync"}[atSync], func(t *testing.T) {
			o := diskOptions(t, "full")
			logger, logs := newLogger()
			o.Logger = logger
			one := fileSize(testBlock, testGeo.BlockFloats(4, 8, true), testHidden)
			ffs := &faultFS{budget: 5*one + one/2, atSync: atSync}
			o.FS = ffs
			c := mustNew(t, o)
			prompt := promptOf(81, 40)
			src, hidden := filled(t, prompt)
			if st := c.Store(context.Background(), src, hidden); st.Blocks != 20 {
				t.Fatalf("stored %+v", st)
			}
			if err := c.Flush(context.Background()); err == nil {
				t.Fatal("flush onto a full disk reported no trouble")
			}
			s := c.Stats()
			if s.DiskFull == 0 || s.WriteErrors == 0 || s.Disk.Blocks != 5 {
				t.Fatalf("stats %+v", s)
			}
			if n := logs.count("cannot write a block to disk"); n != 1 {
				t.Errorf("%d log lines about the full disk:\n%s", n, logs)
			}
			for _, f := range blockFiles(t, o.Dir) {
				if strings.HasSuffix(f, tempExt) {
					t.Errorf("left a temporary file %s", f)
				}
			}
			if u := diskUsage(o.Dir); u != 5*allocSize(one) {
				t.Errorf("disk usage %d, want the 5 files written", u)
			}
			// Memory still serves the whole prefix, exactly.
			seq, _, r := restoreAll(t, c, prompt)
			if r.Tokens != 80 {
				t.Fatalf("restored %d tokens", r.Tokens)
			}
			sameState(t, seq, src, 80)
			// More stores while paused: nothing blocks, nothing fails.
			for i := range 5 {
				s2, h2 := filled(t, promptOf(41, 50+i))
				c.Store(context.Background(), s2, h2)
			}

			// Room again, the pause over: writes resume.
			ffs.mu.Lock()
			ffs.budget = 1 << 30
			ffs.mu.Unlock()
			c.mu.Lock()
			c.disk.pauseUntil = time.Time{}
			c.mu.Unlock()
			c.Store(context.Background(), src, hidden)
			s3, h3 := filled(t, promptOf(41, 60))
			c.Store(context.Background(), s3, h3)
			if err := c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if logs.count("block writes work again") != 1 {
				t.Errorf("no line on writes resuming:\n%s", logs)
			}
			c.Close()
			o.FS = OS{}
			c = mustNew(t, o)
			if m := c.Lookup(promptOf(41, 60)); m.Disk != 40 {
				t.Errorf("after the disk had room again: %+v", m)
			}
			if _, _, r := restoreAll(t, c, prompt); r.Tokens < 5*testBlock || c.Stats().Invalid != 0 {
				t.Errorf("restore after a full disk: %+v, %d invalid", r, c.Stats().Invalid)
			}
		})
	}
}

// TestMinFree: the disk tier leaves free space on the volume.
func TestMinFree(t *testing.T) {
	o := diskOptions(t, "free")
	one := allocSize(fileSize(testBlock, testGeo.BlockFloats(4, 8, true), testHidden))
	o.FS = &faultFS{budget: 1 << 30, avail: 1 << 20, dir: o.Dir}
	o.MinFreeBytes = 1<<20 - 3*one
	o.MemoryBytes = 0
	c := mustNew(t, o)
	src, hidden := filled(t, promptOf(41, 70))
	c.Store(context.Background(), src, hidden)
	c.Flush(context.Background())
	if s := c.Stats(); s.Disk.Bytes != 3*one || diskUsage(o.Dir) != 3*one || s.Disk.Evictions == 0 {
		t.Errorf("with room for 3 files: %+v", s.Disk)
	}
}
