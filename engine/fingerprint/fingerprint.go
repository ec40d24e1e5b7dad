package fingerprint

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/spoolhq/spool/native/diskio"
	"github.com/spoolhq/spool/native/offheap"
)

// Hash is a SHA-256 digest.
type Hash [sha256.Size]byte

func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// Source says where a file's digest came from.
type Source string

const (
	// FromHub: the Hugging Face cache's blob name, verified by the download.
	FromHub Source = "hub"
	// FromStore: computed before, under the same stamp.
	FromStore Source = "store"
	// FromRead: computed now by reading the file.
	FromRead Source = "read"
)

// Options says where digests are remembered, and which checksums are
// wanted besides.
type Options struct {
	// Store is the file of remembered digests ("" remembers nothing: every
	// file not in the Hugging Face cache is read each time).
	Store string
	// Logger hears about files being read and a damaged store (nil:
	// slog.Default()).
	Logger *slog.Logger
	// Regions lists, for each file (by its index in the paths given),
	// byte ranges whose CRC-32C is wanted too (File.CRC32C): the
	// extents of the routed experts, which the streamed tier checks
	// every read against. They are taken in the read that takes the
	// file's digest and remembered with it; a file whose digest is known
	// without a read (the Hugging Face cache) is read for them once.
	// Ranges must lie within the file and not overlap.
	Regions [][]Region
}

// Region is a byte range of a file.
type Region struct {
	Off, Len int64
}

// File is one file's digest.
type File struct {
	Path   string
	SHA256 Hash
	From   Source
	// CRC32C holds the CRC-32C (Castagnoli) of each of the file's
	// Options.Regions, in their order; nil when none were asked for.
	CRC32C []uint32
	// Stamp is the version of the file CRC32C was taken from (zero for
	// a Hugging Face blob asked for no regions: it is not looked at).
	Stamp diskio.Stamp
}

// readChunk is the size of one read while hashing.
const readChunk = 8 << 20

// racyWindow is how recently before its reading a file may have been
// modified for its digest not to be remembered.
const racyWindow = 3 * time.Second

// Files returns the SHA-256 of each file's bytes, in order (see the
// package comment for where each comes from), and the CRC-32C of each of
// its Options.Regions. Files read are remembered in the store.
func Files(ctx context.Context, paths []string, o Options) ([]File, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if o.Regions != nil && len(o.Regions) != len(paths) {
		return nil, fmt.Errorf("fingerprint: regions for %d files, %d files", len(o.Regions), len(paths))
	}
	out := make([]File, len(paths))
	stamps := make([]diskio.Stamp, len(paths))
	regions := make([]*regionSet, len(paths))
	var store *store
	var pending []int
	var pendingBytes int64
	for i, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("fingerprint: %w", err)
		}
		out[i].Path = abs
		if o.Regions != nil && len(o.Regions[i]) > 0 {
			if regions[i], err = newRegionSet(o.Regions[i]); err != nil {
				return nil, fmt.Errorf("fingerprint: %s: %w", abs, err)
			}
		}
		hub := false
		if h, ok := hubDigest(abs); ok {
			out[i].SHA256, out[i].From = h, FromHub
			if regions[i] == nil {
				continue
			}
			hub = true // its checksums are remembered, or read for
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("fingerprint: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("fingerprint: %s is not a regular file (%s)", abs, fi.Mode().Type())
		}
		if err := regions[i].within(fi.Size()); err != nil {
			return nil, fmt.Errorf("fingerprint: %s: %w", abs, err)
		}
		stamps[i] = diskio.StampOf(fi)
		out[i].Stamp = stamps[i]
		if store == nil {
			store = loadStore(o.Store, log)
		}
		if h, sums, ok := store.lookup(abs, stamps[i], regions[i]); ok && (!hub || h == out[i].SHA256) {
			out[i].SHA256, out[i].CRC32C = h, sums
			if !hub {
				out[i].From = FromStore
			}
			continue
		}
		pending = append(pending, i)
		pendingBytes += fi.Size()
	}
	if len(pending) == 0 {
		return out, nil
	}
	start := time.Now()
	// A file modified shortly before it is read may be modified again
	// within the file system's time granularity and keep its stamp: its
	// digest is not remembered (git's "racy" files).
	settled := start.Add(-racyWindow).UnixNano()
	log.Info("fingerprint: reading the weights once to tell this checkpoint from others and take the experts' checksums", "files", len(pending), "bytes", pendingBytes, "store", o.Store)
	if err := hashAll(ctx, out, regions, pending); err != nil {
		return nil, err
	}
	log.Info("fingerprint: weights read", "files", len(pending), "bytes", pendingBytes, "elapsed", time.Since(start).Round(time.Millisecond))
	if o.Store == "" {
		return out, nil
	}
	for _, i := range pending {
		fi, err := os.Stat(out[i].Path)
		if err != nil || diskio.StampOf(fi) != stamps[i] {
			// Changed while it was read: not remembered, and the digest
			// may mix two versions.
			return nil, fmt.Errorf("fingerprint: %s changed while it was read", out[i].Path)
		}
	}
	var keep []int
	for _, i := range pending {
		if stamps[i].ModNanos < settled {
			keep = append(keep, i)
		}
	}
	if len(keep) == 0 {
		return out, nil
	}
	if err := saveStore(o.Store, out, regions, keep, stamps, log); err != nil {
		log.Warn("fingerprint: the digests could not be remembered; they will be computed again next time", "store", o.Store, "err", err)
	}
	return out, nil
}

// Model is the digest of a model's weights: of each shard's name (in dir)
// and the SHA-256 of its bytes, in the order given.
func Model(ctx context.Context, dir string, shards []string, o Options) (Hash, error) {
	h, _, err := ModelFiles(ctx, dir, shards, o)
	return h, err
}

// ModelFiles is Model, with each shard's File (its digest, and the
// checksums of its Options.Regions).
func ModelFiles(ctx context.Context, dir string, shards []string, o Options) (Hash, []File, error) {
	paths := make([]string, len(shards))
	for i, s := range shards {
		paths[i] = filepath.Join(dir, s)
	}
	files, err := Files(ctx, paths, o)
	if err != nil {
		return Hash{}, nil, err
	}
	h := sha256.New()
	writeString(h, "spool weights v1")
	for i, f := range files {
		writeString(h, shards[i])
		h.Write(f.SHA256[:])
	}
	return Hash(h.Sum(nil)), files, nil
}

func writeString(h hash.Hash, s string) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
	h.Write(b[:])
	h.Write([]byte(s))
}

// hubDigest reads the SHA-256 of a file that is a link into a Hugging
// Face cache's blobs directory from the blob's name.
func hubDigest(path string) (Hash, bool) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return Hash{}, false
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil || filepath.Base(filepath.Dir(target)) != "blobs" {
		return Hash{}, false
	}
	name := filepath.Base(target)
	var h Hash
	if len(name) != 2*len(h) {
		return Hash{}, false
	}
	for _, c := range name {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return Hash{}, false
		}
	}
	if _, err := hex.Decode(h[:], []byte(name)); err != nil {
		return Hash{}, false
	}
	return h, true
}

// hashAll reads the files out[pending] and fills in their digests (but
// those from the Hugging Face cache) and their regions' checksums, a few
// files at a time.
func hashAll(ctx context.Context, out []File, regions []*regionSet, pending []int) error {
	workers := min(len(pending), max(1, runtime.GOMAXPROCS(0)/2), 4)
	next := make(chan int)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slab, err := offheap.AllocAligned(readChunk, diskio.DirectAlign)
			if err != nil {
				errs[w] = fmt.Errorf("fingerprint: %w", err)
				cancel()
				for range next {
				}
				return
			}
			defer offheap.Free(slab)
			for i := range next {
				if errs[w] != nil {
					continue
				}
				hub := out[i].From == FromHub
				var h Hash
				if h, out[i].CRC32C, errs[w] = hashFile(ctx, out[i].Path, slab, regions[i], !hub); errs[w] != nil {
					cancel()
					continue
				}
				if !hub {
					out[i].SHA256, out[i].From = h, FromRead
				}
			}
		}()
	}
feed:
	for _, i := range pending {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return context.Cause(ctx)
}

// hashFile reads a file whole through slab (aligned, readChunk bytes):
// its SHA-256 when digest is set, and the CRC-32C of each of regions.
func hashFile(ctx context.Context, path string, slab []byte, regions *regionSet, digest bool) (Hash, []uint32, error) {
	f, err := diskio.OpenDirect(path)
	if err != nil {
		return Hash{}, nil, fmt.Errorf("fingerprint: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	size := f.Size()
	if err := regions.within(size); err != nil {
		return Hash{}, nil, fmt.Errorf("fingerprint: %s: %w", path, err)
	}
	sums := regions.summer()
	for off := int64(0); off < size; off += readChunk {
		if err := ctx.Err(); err != nil {
			return Hash{}, nil, err
		}
		b, err := f.ReadAtAligned(slab, off, min(readChunk, size-off))
		if err != nil {
			return Hash{}, nil, fmt.Errorf("fingerprint: %w", err)
		}
		if digest {
			h.Write(b)
		}
		sums.add(off, b)
	}
	return Hash(h.Sum(nil)), sums.result(), nil
}
