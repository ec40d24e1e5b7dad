package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"time"

	"github.com/spoolhq/spool/engine/download/hub"
)

// errStalled is the cause of a request aborted because no byte arrived for
// StallTimeout.
var errStalled = errors.New("stalled: no data received")

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
	t.ioMu.Lock()
	f := t.f
	t.ioMu.Unlock()
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
			if w >= j.opts.CheckpointBytes && pos < p.end {
				// Syncing and hashing are not the server's stall.
				timer.Stop()
				if err := j.checkpointPiece(ctx, rs, t, p); err != nil {
					return err
				}
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
	case errors.As(err, &we), errors.As(err, &df), errors.Is(err, hub.ErrSizeMismatch):
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
	var ue *url.Error
	return errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF)
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
	t.ioMu.Lock()
	err := j.writeRecordLocked(rs, t)
	t.ioMu.Unlock()
	if err != nil {
		return err
	}
	return j.advanceHash(ctx, rs, t)
}
