package promptcache

import (
	"container/list"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spoolhq/spool/native/diskio"
)

// The disk tier's directory holds a lock file and one directory per cache
// identity, named by the first 16 hex digits of its digest, holding one file
// per block: <chain hash in hex>.blk. Nothing else in it is touched.
const (
	lockName  = ".lock"
	blockExt  = ".blk"
	tempExt   = ".tmp"
	idDirLen  = 16
	allocUnit = 4096 // file sizes count in allocation units
)

// diskFile is a block file the disk tier counts.
type diskFile struct {
	hash  Hash
	path  string
	size  int64 // the file's size
	alloc int64 // its size rounded up to allocUnit: what it counts
	mtp   bool
	own   bool // this identity's (others are only counted and evicted)
	mtime time.Time
	stale bool // mtime not yet written to the file
	elem  *list.Element
}

// diskTier is the disk tier's state; the Cache's mutex guards it.
type diskTier struct {
	fs      FS
	root    string // the directory given
	dir     string // this identity's directory in it
	max     int64
	minFree int64
	log     *slog.Logger
	unlock  func() error

	used       int64     // bytes counted (allocation units), reservations included
	otherBytes int64     // part of used in other identities' files
	lru        list.List // of *diskFile, most recently used first (by mtime)
	files      map[Hash]*diskFile
	stale      int

	invalidAtOpen int64
	pauseUntil    time.Time // writes pause until then (disk full, failing)
	failing       bool      // the last write failed (logged once)
}

func allocSize(n int64) int64 { return (n + allocUnit - 1) &^ (allocUnit - 1) }

// openDisk locks and scans the disk tier's directory: it counts every block
// file (other identities' too), deletes leftover temporary files and this
// identity's files whose size no block can have, and evicts down to the cap.
func openDisk(o Options, root Hash, sizes [3]int64, log *slog.Logger) (*diskTier, error) {
	d := &diskTier{
		fs: o.FS, root: o.Dir, max: o.DiskBytes, minFree: o.MinFreeBytes, log: log,
		dir:   filepath.Join(o.Dir, hex.EncodeToString(root[:])[:idDirLen]),
		files: map[Hash]*diskFile{},
	}
	if err := d.fs.MkdirAll(d.dir); err != nil {
		return nil, fmt.Errorf("creating %s: %w", d.dir, err)
	}
	unlock, err := diskio.LockFile(filepath.Join(o.Dir, lockName))
	if err != nil {
		if errors.Is(err, diskio.ErrLocked) {
			return nil, fmt.Errorf("%s is in use by another Spool process", o.Dir)
		}
		return nil, err
	}
	d.unlock = unlock
	if err := d.scan(sizes); err != nil {
		d.unlock()
		return nil, err
	}
	for _, p := range d.shrink(d.max) {
		d.fs.Remove(p)
	}
	log.Info("prompt cache: disk tier", "model", o.Identity.Name, "dir", o.Dir, "blocks", len(d.files), "bytes", d.used, "cap", d.max)
	return d, nil
}

func (d *diskTier) scan(sizes [3]int64) error {
	ents, err := d.fs.ReadDir(d.root)
	if err != nil {
		return fmt.Errorf("reading %s: %w", d.root, err)
	}
	var found []*diskFile
	for _, ent := range ents {
		if !ent.IsDir() || !isHex(ent.Name(), idDirLen) {
			continue
		}
		sub := filepath.Join(d.root, ent.Name())
		own := sub == d.dir
		files, err := d.fs.ReadDir(sub)
		if err != nil {
			d.log.Warn("prompt cache: cannot read a cache directory", "dir", sub, "err", err)
			continue
		}
		for _, f := range files {
			name := f.Name()
			path := filepath.Join(sub, name)
			if strings.HasSuffix(name, tempExt) && f.Type().IsRegular() {
				d.fs.Remove(path) // a write that did not finish
				continue
			}
			stem, ok := strings.CutSuffix(name, blockExt)
			if !ok || !isHex(stem, 2*len(Hash{})) || !f.Type().IsRegular() {
				continue
			}
			info, err := f.Info()
			if err != nil {
				continue
			}
			df := &diskFile{path: path, size: info.Size(), alloc: allocSize(info.Size()), own: own, mtime: info.ModTime()}
			hex.Decode(df.hash[:], []byte(stem))
			if own {
				switch df.size {
				case sizes[0]:
				case sizes[1], sizes[2]:
					df.mtp = true
				default:
					d.log.Warn("prompt cache: ignored and deleted an invalid block file", "path", path,
						"reason", fmt.Sprintf("%d bytes, no block of this model has that size", df.size))
					d.fs.Remove(path)
					d.invalidAtOpen++
					continue
				}
			}
			found = append(found, df)
		}
	}
	slices.SortFunc(found, func(a, b *diskFile) int { return b.mtime.Compare(a.mtime) })
	for _, f := range found {
		f.elem = d.lru.PushBack(f)
		d.count(f, +1)
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// count adds (sign +1) or removes (-1) f from the index and the byte count.
func (d *diskTier) count(f *diskFile, sign int64) {
	d.used += sign * f.alloc
	if !f.own {
		d.otherBytes += sign * f.alloc
		return
	}
	if sign > 0 {
		d.files[f.hash] = f
	} else if d.files[f.hash] == f {
		delete(d.files, f.hash)
	}
}

// drop forgets f (the caller removes the file).
func (d *diskTier) drop(f *diskFile) {
	if f.elem == nil {
		return
	}
	d.lru.Remove(f.elem)
	f.elem = nil
	if f.stale {
		d.stale--
		f.stale = false
	}
	d.count(f, -1)
}

// shrink evicts least recently used files until used <= limit and returns
// their paths.
func (d *diskTier) shrink(limit int64) []string {
	var paths []string
	for d.used > limit {
		back := d.lru.Back()
		if back == nil {
			break
		}
		f := back.Value.(*diskFile)
		d.drop(f)
		paths = append(paths, f.path)
	}
	return paths
}

// place puts f at its recency's position in the LRU, searching from hint
// (a file at least as recent) when it is still counted.
func (d *diskTier) place(f *diskFile, hint *diskFile) {
	if f.elem != nil {
		d.lru.Remove(f.elem)
		f.elem = nil
	}
	var at *list.Element
	if hint != nil && hint != f {
		at = hint.elem
	}
	if at == nil || at.Value.(*diskFile).mtime.Before(f.mtime) {
		at = d.lru.Front()
		if at == nil || at.Value.(*diskFile).mtime.Before(f.mtime) {
			f.elem = d.lru.PushFront(f)
			return
		}
	}
	for next := at.Next(); next != nil && !next.Value.(*diskFile).mtime.Before(f.mtime); next = at.Next() {
		at = next
	}
	f.elem = d.lru.InsertAfter(f, at)
}

// touch records a use of f at recency t.
func (d *diskTier) touch(f *diskFile, t time.Time, hint *diskFile) {
	f.mtime = t
	if !f.stale {
		f.stale = true
		d.stale++
	}
	d.place(f, hint)
}

// paused reports whether writes are paused at now.
func (d *diskTier) paused(now time.Time) bool { return now.Before(d.pauseUntil) }

// reserve counts size bytes for a file about to be written, evicting
// least recently used files to stay within the cap and to leave minFree on
// the volume. It returns the paths to remove and whether the room is there.
func (d *diskTier) reserve(size int64) ([]string, bool) {
	need := allocSize(size)
	limit := d.max
	if avail, err := d.fs.Available(d.dir); err == nil {
		limit = min(limit, d.used+avail-d.minFree)
	}
	if need > limit {
		return nil, false
	}
	paths := d.shrink(limit - need)
	d.used += need
	return paths, true
}

// writeFile writes data as the block file of h: a temporary file in the
// same directory, synced, then renamed over the final name, with its
// modification time set to mtime, and the directory synced: the protocol
// of internal/atomicfile, through FS so that tests can put a full disk in
// front of it.
func (d *diskTier) writeFile(h Hash, data []byte, mtime time.Time) (path string, err error) {
	path = filepath.Join(d.dir, h.String()+blockExt)
	tmp, err := d.fs.CreateTemp(d.dir, h.String()+".*"+tempExt)
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = d.fs.Chtimes(tmp.Name(), mtime)
	}
	if err == nil {
		err = d.fs.Rename(tmp.Name(), path)
	}
	if err != nil {
		d.fs.Remove(tmp.Name())
		return "", err
	}
	if err := d.fs.SyncDir(d.dir); err != nil {
		d.fs.Remove(path) // not durable: not counted, so not kept
		return "", err
	}
	return path, nil
}

// staleTimes collects the recencies not yet written to files and marks
// them written.
func (d *diskTier) staleTimes() map[string]time.Time {
	if d.stale == 0 {
		return nil
	}
	out := make(map[string]time.Time, d.stale)
	for _, f := range d.files {
		if f.stale {
			out[f.path] = f.mtime
			f.stale = false
		}
	}
	d.stale = 0
	return out
}

func (d *diskTier) close() error {
	if d.unlock == nil {
		return nil
	}
	err := d.unlock()
	d.unlock = nil
	return err
}

// removeFile deletes a file the index no longer holds; a file already gone
// is fine.
func (d *diskTier) removeFile(path string) {
	if err := d.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("prompt cache: cannot delete a block file", "path", path, "err", err)
	}
}
