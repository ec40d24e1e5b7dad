package download

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"slices"
	"time"

	"github.com/spoolhq/spool/engine/download/hub"
)

// errStalled is the cause of a request aborted because no byte arrived for
// StallTimeout.
var errStalled = errors.New("stalled: no data received")

// errPieceCovered ends a piece whose bytes another worker's sequential
// stream of the same blob fetches; errPieceRequeued one that must wait for
// such a stream to start before it.
var (
	errPieceCovered  = errors.New("piece covered by the blob's sequential stream")
	errPieceRequeued = errors.New("piece requeued behind the blob's sequential stream")
)

// fetchPiece fetches the rest of a piece into the partial file, retrying
// temporary failures with exponential backoff and jitter. The failure count
// starts over whenever a request moved bytes.
func (j *Job) fetchPiece(ctx context.Context, rs *runState, t *blobTask, p *piece, buf []byte) error {
	failures := 0
	for p.off+p.written.Load() < p.end {
		before := p.written.Load()
		err := j.fetchOnce(ctx, rs, t, p, buf)
		if err == nil {
			continue
		}
		if errors.Is(err, errPieceCovered) || errors.Is(err, errPieceRequeued) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryable(err) {
			return fmt.Errorf("download: %s: %w", t.paths[0], err)
		}
		if p.written.Load() > before {
			failures = 0
		}
		failures++
		if failures > j.opts.MaxRetries {
			return fmt.Errorf("download: %s: giving up after %d failed requests in a row (run again to resume): %w", t.paths[0], failures, err)
		}
		wait := j.backoff(failures, err)
		j.emit(Event{Kind: EventRetry, File: t.paths[0], RetryIn: wait.Seconds(), Progress: j.progressNow(rs),
			Message: fmt.Sprintf("%s: %v; retry %d in %s", t.paths[0], err, failures, wait.Round(time.Millisecond))})
		if err := sleepCtx(ctx, wait); err != nil {
			return err
		}
	}
	return nil
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// fetchOnce makes one ranged request for the rest of p and writes what
// arrives in place. A request that moves no byte for StallTimeout is
// aborted with errStalled.
func (j *Job) fetchOnce(ctx context.Context, rs *runState, t *blobTask, p *piece, buf []byte) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(j.opts.StallTimeout, func() { cancel(errStalled) })
	defer timer.Stop()
	stalled := func(err error) error {
		if ctx.Err() == nil && context.Cause(sctx) == errStalled {
			return fmt.Errorf("%w for %s", errStalled, j.opts.StallTimeout)
		}
		return err
	}

	pos := p.off + p.written.Load()
	body, err := j.opts.Client.Fetch(sctx, j.opts.Repo, rs.commit, t.file, pos, p.end)
	if err != nil {
		return stalled(err)
	}
	defer body.Close()
	if !body.Whole || pos == 0 && p.end == t.file.Size {
		j.rangesHonored(rs, t)
	} else {
		// The server ignored the range and sends the whole file: fetch
		// this blob as one sequential stream instead of paying for the
		// bytes before every piece.
		if err := j.goSequential(rs, t, p); err != nil {
			return err
		}
		for skip := pos - body.Start; skip > 0; {
			timer.Reset(j.opts.StallTimeout)
			n, rerr := body.Read(buf[:min(int64(len(buf)), skip)])
			skip -= int64(n)
			if rerr != nil && skip > 0 {
				return stalled(rerr)
			}
		}
	}
	t.ioMu.Lock()
	f := t.f
	t.ioMu.Unlock()
	lastCheckpoint := time.Now()
	for {
		timer.Reset(j.opts.StallTimeout)
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, werr := f.WriteAt(buf[:n], pos); werr != nil {
				return j.diskErr(t, werr)
			}
			pos += int64(n)
			w := p.written.Add(int64(n))
			t.progress.Add(int64(n))
			rs.fetched.Add(int64(n))
			if pos < p.end && (w >= j.opts.CheckpointBytes || time.Since(lastCheckpoint) >= j.opts.CheckpointInterval) {
				// Syncing and hashing are not the server's stall.
				timer.Stop()
				if err := j.checkpointPiece(ctx, rs, t, p); err != nil {
					return err
				}
				lastCheckpoint = time.Now()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return stalled(rerr)
		}
	}
}

// retryable reports whether a failed request should be tried again: network
// errors, early ends, stalls, 408/429/5xx. Answers that will not change
// (401, 403, 404, a size that contradicts the manifest) and local write
// failures are final.
func retryable(err error) bool {
	var se *hub.StatusError
	if errors.As(err, &se) {
		return se.Temporary()
	}
	var we *writeError
	var df *DiskFullError
	switch {
	case errors.As(err, &we), errors.As(err, &df), errors.Is(err, hub.ErrSizeMismatch),
		errors.Is(err, hub.ErrBadContentRange), errors.Is(err, hub.ErrRedirectLoop):
		return false
	}
	return true
}

// transient reports whether an API call failed in a way that may pass: a
// 408/429/5xx answer, a transport failure, or an answer cut short.
func transient(err error) bool {
	var se *hub.StatusError
	if errors.As(err, &se) {
		return se.Temporary()
	}
	if errors.Is(err, hub.ErrRedirectLoop) {
		return false
	}
	var ue *url.Error
	return errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF)
}

// rangesHonored records that the blob's server answered a range, letting
// the other pieces of the blob go out.
func (j *Job) rangesHonored(rs *runState, t *blobTask) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !t.rangesKnown {
		t.rangesKnown = true
		rs.broadcast()
	}
}

// goSequential switches a blob whose server ignores ranges to one stream:
// the first piece not yet fetched becomes the stream to the end of the
// blob, and every other piece is dropped (covered by it) or waits for it.
// It returns nil when p is (now) the stream, errPieceCovered when another
// worker's stream fetches p's bytes, and errPieceRequeued when p was put
// back because bytes before it are still missing.
func (j *Job) goSequential(rs *runState, t *blobTask, p *piece) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	t.rangesKnown = true
	if !t.sequential {
		t.sequential = true
		j.emit(Event{Kind: EventWarning, File: t.paths[0],
			Message: fmt.Sprintf("%s: the server ignores byte ranges; fetching it as one stream", t.paths[0])})
	}
	switch s := t.streamer; {
	case s == p:
		return nil // the stream itself, asking again after a failure
	case s != nil && p.off >= t.streamFrom:
		delete(t.inflight, p)
		return errPieceCovered
	case s != nil:
		// A piece before the stream's start reads its own bytes.
		return nil
	}
	for q := range t.inflight {
		if q != p && q.off < p.off {
			// A piece before p is in flight: it becomes the stream.
			delete(t.inflight, p)
			t.pending = append([]*piece{p}, t.pending...)
			rs.broadcast()
			return errPieceRequeued
		}
	}
	for _, q := range t.pending {
		if q.off < p.off {
			delete(t.inflight, p)
			t.pending = append(t.pending, p)
			slices.SortFunc(t.pending, func(a, b *piece) int { return cmp.Compare(a.off, b.off) })
			rs.broadcast()
			return errPieceRequeued
		}
	}
	t.streamer, t.streamFrom = p, p.off
	p.end = t.file.Size
	t.pending = nil
	rs.broadcast()
	return nil
}

// backoff is the wait before retry number failures (1-based): RetryBase
// doubled per failure up to RetryMax, with jitter, or what the server asked
// for with Retry-After if that is longer.
func (j *Job) backoff(failures int, err error) time.Duration {
	d := j.opts.RetryBase
	for i := 1; i < failures && d < j.opts.RetryMax; i++ {
		d *= 2
	}
	d = min(d, j.opts.RetryMax)
	d = d/2 + rand.N(d/2+1)
	var se *hub.StatusError
	if errors.As(err, &se) && se.RetryAfter > d {
		d = min(se.RetryAfter, 5*time.Minute)
	}
	return d
}

// checkpointPiece records the bytes of an in-flight piece written so far:
// they join the blob's done ranges, the piece shrinks to the rest, and the
// resume record is written. Only the piece's holder calls it.
func (j *Job) checkpointPiece(ctx context.Context, rs *runState, t *blobTask, p *piece) error {
	rs.mu.Lock()
	w := p.written.Load()
	t.done = t.done.Add(Range{p.off, p.off + w})
	p.off += w
	p.written.Store(0)
	rs.mu.Unlock()
	return j.recordAndHash(ctx, rs, t)
}

// recordAndHash writes the blob's resume record, then feeds its hasher
// what is now contiguous.
func (j *Job) recordAndHash(ctx context.Context, rs *runState, t *blobTask) error {
	t.ioMu.Lock()
	err := j.writeRecordLocked(rs, t)
	t.ioMu.Unlock()
	if err != nil {
		return err
	}
	return j.advanceHash(ctx, rs, t)
}
