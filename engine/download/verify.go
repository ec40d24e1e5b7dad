package download

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"

	"github.com/spoolhq/spool/engine/download/hfcache"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/native/diskio"
)

// blobHasher computes the hash a blob is named by: sha256 of the content for
// LFS files, the git blob sha1 ("blob <size>\x00" + content) otherwise.
type blobHasher struct {
	h    hash.Hash
	git  bool
	size int64
	want string
}

func newBlobHasher(f hub.File) blobHasher {
	b := blobHasher{git: !f.LFS(), size: f.Size, want: f.Etag()}
	b.reset()
	return b
}

func (b *blobHasher) reset() {
	if b.git {
		b.h = sha1.New()
		fmt.Fprintf(b.h, "blob %d\x00", b.size)
		return
	}
	b.h = sha256.New()
}

func (b *blobHasher) sum() string { return hex.EncodeToString(b.h.Sum(nil)) }

// hashChunk is the read size used to hash a partial.
const hashChunk = 1 << 20

// pieceDone records a fetched piece, checkpoints it and advances
// verification.
func (j *Job) pieceDone(ctx context.Context, rs *runState, t *blobTask, p *piece) error {
	rs.mu.Lock()
	delete(t.inflight, p)
	t.done = t.done.Add(Range{p.off, p.end})
	rs.mu.Unlock()
	if p.end > p.off {
		return j.recordAndHash(ctx, rs, t)
	}
	return j.advanceHash(ctx, rs, t)
}

// advanceHash feeds the blob's contiguous prefix to its hasher, reading it
// back from the partial file, and finalizes the blob once all of it is
// hashed. One worker hashes a blob at a time; others leave a note and go on.
func (j *Job) advanceHash(ctx context.Context, rs *runState, t *blobTask) error {
	rs.mu.Lock()
	if t.finished {
		rs.mu.Unlock()
		return nil
	}
	if t.hashing {
		t.rehash = true
		rs.mu.Unlock()
		return nil
	}
	t.hashing = true
	for {
		t.rehash = false
		from, to := t.hashed, t.done.Prefix()
		rs.mu.Unlock()
		n, err := j.hashRange(ctx, t, from, to)
		rs.mu.Lock()
		t.hashed = from + n
		if err != nil {
			t.hashing = false
			rs.mu.Unlock()
			return err
		}
		if t.hashed == t.file.Size {
			rs.mu.Unlock()
			return j.finalize(rs, t)
		}
		if !t.rehash {
			t.hashing = false
			rs.mu.Unlock()
			return nil
		}
	}
}

// hashRange feeds bytes [from, to) of the partial to the hasher and returns
// how many it fed.
func (j *Job) hashRange(ctx context.Context, t *blobTask, from, to int64) (int64, error) {
	if to <= from {
		return 0, nil
	}
	t.ioMu.Lock()
	f := t.f
	t.ioMu.Unlock()
	if t.hashBuf == nil {
		t.hashBuf = make([]byte, hashChunk)
	}
	var n int64
	for from+n < to {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		buf := t.hashBuf[:min(int64(len(t.hashBuf)), to-from-n)]
		m, err := f.ReadAt(buf, from+n)
		if m < len(buf) {
			if err == nil {
				err = errors.New("short read")
			}
			return n, &writeError{t.partialPath, fmt.Errorf("read back bytes %d-%d to verify: %w", from+n, from+n+int64(len(buf)), err)}
		}
		t.hasher.h.Write(buf)
		n += int64(m)
	}
	return n, nil
}

// finalize publishes a fully hashed blob whose hash matches, or throws the
// partial away and requeues the whole blob when it does not.
func (j *Job) finalize(rs *runState, t *blobTask) error {
	if got := t.hasher.sum(); got != t.hasher.want {
		return j.integrityFailure(rs, t, got)
	}
	t.ioMu.Lock()
	err := j.publishLocked(rs.commit, t)
	t.ioMu.Unlock()
	if err != nil {
		rs.mu.Lock()
		t.hashing = false
		rs.mu.Unlock()
		return err
	}
	rs.mu.Lock()
	t.finished, t.active, t.hashing = true, false, false
	t.hashBuf = nil
	rs.broadcast()
	rs.mu.Unlock()
	for _, p := range t.paths {
		j.emit(Event{Kind: EventFileDone, File: p, Progress: j.progressNow(rs)})
	}
	return nil
}

// publishLocked syncs and closes the verified partial, renames it to
// blobs/<etag>, drops its resume record, links every path of the snapshot to
// it and releases the blob lock. Call with t.ioMu held.
func (j *Job) publishLocked(commit string, t *blobTask) error {
	if err := t.f.Sync(); err != nil {
		return j.diskErr(t, err)
	}
	if err := t.f.Close(); err != nil {
		return j.diskErr(t, err)
	}
	t.f = nil
	if err := j.layout.Place(commit, t.file, t.paths, t.partialPath); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	if err := hfcache.RemoveIfExists(t.recordPath); err != nil {
		return fmt.Errorf("download: remove resume record of %s: %w", t.paths[0], err)
	}
	if t.unlock != nil {
		err := t.unlock()
		t.unlock = nil
		if err != nil {
			return fmt.Errorf("download: %w", err)
		}
	}
	return nil
}

// integrityFailure deletes a partial whose hash is wrong and requeues the
// whole blob, or fails the job when the blob failed too often.
func (j *Job) integrityFailure(rs *runState, t *blobTask, got string) error {
	t.ioMu.Lock()
	t.f.Close()
	t.f = nil
	rmErr := errors.Join(hfcache.RemoveIfExists(t.partialPath), hfcache.RemoveIfExists(t.recordPath))
	t.ioMu.Unlock()
	if rmErr != nil {
		return fmt.Errorf("download: %s failed verification and could not be deleted: %w", t.paths[0], rmErr)
	}
	rs.mu.Lock()
	t.failures++
	t.done, t.recorded, t.hashed = nil, nil, 0
	t.hasher.reset()
	t.progress.Store(0)
	t.hashing = false
	failures := t.failures
	if failures <= j.opts.MaxIntegrityRetries {
		t.pending = splitPieces(Ranges{{0, t.file.Size}}, t.file.Size, j.opts.ChunkSize)
		rs.broadcast()
	}
	rs.mu.Unlock()
	if failures > j.opts.MaxIntegrityRetries {
		return &IntegrityError{Path: t.paths[0], Want: t.hasher.want, Got: got, Attempts: failures}
	}
	j.emit(Event{Kind: EventIntegrity, File: t.paths[0], Progress: j.progressNow(rs),
		Message: fmt.Sprintf("%s failed verification (expected %s, got %s); deleted and fetching it again", t.paths[0], t.hasher.want, got)})
	return nil
}

// stopAll runs after the workers stopped: bytes written by interrupted
// pieces join the done ranges, every open partial is synced and
// checkpointed, files are closed and blob locks released.
func (j *Job) stopAll(rs *runState) error {
	rs.mu.Lock()
	for _, t := range rs.tasks {
		for p := range t.inflight {
			if w := p.written.Load(); w > 0 {
				t.done = t.done.Add(Range{p.off, p.off + w})
				p.off += w
				p.written.Store(0)
			}
			if p.off < p.end {
				t.pending = append(t.pending, p)
			}
		}
		clear(t.inflight)
		slices.SortFunc(t.pending, func(a, b *piece) int { return int(min(max(a.off-b.off, -1), 1)) })
		if !t.finished && len(t.pending) == 0 {
			// Everything is on disk but not yet verified: a worker must
			// still hash and publish it.
			t.pending = []*piece{{off: t.file.Size, end: t.file.Size}}
		}
		t.hashing, t.rehash, t.active = false, false, false
	}
	tasks := slices.Clone(rs.tasks)
	rs.mu.Unlock()
	var errs []error
	for _, t := range tasks {
		t.ioMu.Lock()
		if t.f != nil {
			errs = append(errs, j.writeRecordLocked(rs, t))
			errs = append(errs, t.f.Close())
			t.f = nil
		}
		if t.unlock != nil {
			errs = append(errs, t.unlock())
			t.unlock = nil
		}
		t.ioMu.Unlock()
	}
	return errors.Join(errs...)
}

// lockBlob takes the huggingface_hub lock of a blob.
func lockBlob(path string) (func() error, error) {
	unlock, err := diskio.LockFile(path)
	switch {
	case err == nil:
		return unlock, nil
	case errors.Is(err, errors.ErrUnsupported):
		return func() error { return nil }, nil
	case errors.Is(err, diskio.ErrLocked):
		return nil, fmt.Errorf("another process is writing this blob (lock %s is held); wait for it to finish or stop it, then run again", path)
	}
	return nil, err
}
