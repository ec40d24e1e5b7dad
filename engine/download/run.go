package download

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolhq/spool/engine/download/hfcache"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/internal/atomicfile"
	"github.com/spoolhq/spool/native/sysinfo"
)

// runState is the state of one Run: the blobs to fetch and the counters.
type runState struct {
	commit       string
	total        int64 // bytes of distinct blobs
	presentBase  int64 // bytes of blobs complete before the run
	filesTotal   int
	filesPresent int // files whose blob was complete before the run
	fetched      atomic.Int64

	mu      sync.Mutex    // guards the scheduling fields of tasks and changed
	tasks   []*blobTask   // in manifest order
	changed chan struct{} // closed and replaced when work is requeued or finished
	// admit is Options.Admit (nil: every blob may start).
	admit func(hub.File) bool
}

// blobTask is one blob being fetched.
type blobTask struct {
	file        hub.File
	paths       []string
	partialPath string
	recordPath  string

	progress atomic.Int64 // bytes on disk: checkpointed, completed or being written

	// Guarded by runState.mu.
	pending  []*piece // ranges to fetch, in order
	inflight map[*piece]bool
	done     Ranges // ranges written completely (checkpointed or about to be)
	recorded Ranges // ranges of the last resume record written
	active   bool   // a piece was handed out and the blob is not finished
	admitted bool   // Options.Admit let it start (or it had bytes on disk)
	finished bool
	hashing  bool  // a worker is hashing or finalizing
	rehash   bool  // more prefix arrived while hashing
	hashed   int64 // bytes of the prefix fed to hasher
	failures int   // verification failures
	// rangesKnown: a content answer for the blob said whether its server
	// honors ranges; until then one piece of it is in flight at a time.
	// sequential: the server ignores ranges, so the blob is fetched by
	// one stream (streamer) from streamFrom to its end.
	rangesKnown bool
	sequential  bool
	streamer    *piece
	streamFrom  int64

	// Used by one worker at a time (the one holding hashing).
	hasher blobHasher

	// ioMu guards the open file, the blob lock and the resume record.
	ioMu   sync.Mutex
	f      PartialFile
	unlock func() error

	hashBuf []byte // read buffer of the hashing worker
}

// piece is a byte range of a blob handed to one worker at a time.
type piece struct {
	off, end int64
	written  atomic.Int64 // bytes of [off, end) written in place by the current holder
}

// Run downloads what the plan says is missing, then links the snapshot and
// writes the ref. It computes a plan first (listing files once per job) and
// refuses with a *PreflightError, before any payload byte, when free space is
// short. Run returns nil when every file is in the cache; on any other end it
// keeps every checkpointed byte, so a later Run resumes.
func (j *Job) Run(ctx context.Context) error {
	j.mu.Lock()
	if j.running {
		j.mu.Unlock()
		return ErrRunning
	}
	j.running = true
	j.mu.Unlock()
	defer func() {
		j.mu.Lock()
		j.running = false
		j.mu.Unlock()
	}()
	err := j.run(ctx)
	switch {
	case err == nil:
		j.setState(StateDone, "")
	case errors.Is(err, ErrCancelled):
		j.setState(StateCancelled, err.Error())
	default:
		j.setState(StateFailed, err.Error())
	}
	return err
}

func (j *Job) run(ctx context.Context) error {
	plan, err := j.Plan(ctx)
	if err != nil {
		return err
	}
	if !plan.Preflight.OK {
		return &PreflightError{Preflight: plan.Preflight}
	}
	rs := j.newRunState(plan)
	if err := j.prepare(plan); err != nil {
		return err
	}
	j.mu.Lock()
	j.rs = rs
	j.mu.Unlock()
	defer func() {
		j.mu.Lock()
		j.rs = nil
		j.mu.Unlock()
	}()
	j.mu.Lock()
	j.last = rs.snapshot(nil, time.Now())
	j.mu.Unlock()

	repCtx, stopReporter := context.WithCancel(context.Background())
	var repWG sync.WaitGroup
	repWG.Add(1)
	go func() {
		defer repWG.Done()
		j.report(repCtx, rs)
	}()
	defer func() {
		stopReporter()
		repWG.Wait()
		j.publishProgress(rs, nil)
	}()

	for {
		j.mu.Lock()
		if j.cancelled {
			j.mu.Unlock()
			return fmt.Errorf("download of %s: %w; partial files are kept and a new download resumes them", j.opts.Repo, ErrCancelled)
		}
		if j.paused {
			wake := j.wake
			j.mu.Unlock()
			j.setState(StatePaused, "")
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				return fmt.Errorf("download of %s stopped while paused (%v): %w", j.opts.Repo, context.Cause(ctx), ErrCancelled)
			}
		}
		runCtx, cancel := context.WithCancelCause(ctx)
		j.runCancel = cancel
		j.mu.Unlock()

		j.setState(StateDownloading, "")
		err := j.runOnce(runCtx, rs)
		cause := context.Cause(runCtx)
		cancel(nil)
		j.mu.Lock()
		j.runCancel = nil
		j.mu.Unlock()
		if err == nil {
			return j.finish(plan)
		}
		if cause == errPaused || cause == errCancelCall {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("download of %s stopped (%v), progress kept: %w", j.opts.Repo, context.Cause(ctx), ErrCancelled)
		}
		if cause != nil && !errors.Is(err, cause) {
			// The run was stopped from outside its workers (the
			// free-space guard).
			err = cause
		}
		return j.decorate(rs, err)
	}
}

// newRunState turns a plan into tasks: pieces for every missing range of
// every blob that is not complete.
func (j *Job) newRunState(plan *Plan) *runState {
	rs := &runState{commit: plan.Commit, total: plan.BlobBytes, changed: make(chan struct{}), admit: j.opts.Admit}
	for _, b := range plan.blobs {
		rs.filesTotal += len(b.paths)
		if b.complete {
			rs.presentBase += b.file.Size
			rs.filesPresent += len(b.paths)
			continue
		}
		partial := j.layout.PartialPath(b.file.Etag())
		t := &blobTask{
			file: b.file, paths: b.paths, partialPath: partial, recordPath: recordPath(partial),
			inflight: map[*piece]bool{}, done: b.done, recorded: b.done, hasher: newBlobHasher(b.file),
			admitted: b.done.Len() > 0, // started before: its bytes are on disk
		}
		t.pending = splitPieces(b.done.Missing(b.file.Size), b.file.Size, j.opts.ChunkSize)
		t.progress.Store(b.done.Len())
		rs.tasks = append(rs.tasks, t)
	}
	return rs
}

// splitPieces cuts missing ranges into pieces of at most chunk bytes. A blob
// with nothing missing gets one empty piece so that a worker verifies it.
func splitPieces(missing Ranges, size, chunk int64) []*piece {
	if len(missing) == 0 {
		return []*piece{{off: size, end: size}}
	}
	var ps []*piece
	for _, r := range missing {
		for off := r.Start; off < r.End; off += chunk {
			ps = append(ps, &piece{off: off, end: min(off+chunk, r.End)})
		}
	}
	return ps
}

// prepare links the files whose blobs are complete and removes leftovers of
// their downloads.
func (j *Job) prepare(plan *Plan) error {
	if err := os.MkdirAll(filepath.Dir(j.layout.PartialPath("x")), 0o755); err != nil {
		return fmt.Errorf("download: create the directory for partial files: %w", err)
	}
	for _, b := range plan.blobs {
		if !b.complete {
			continue
		}
		if err := j.layout.Place(plan.Commit, b.file, b.paths, ""); err != nil {
			return fmt.Errorf("download: %w", err)
		}
		partial := j.layout.PartialPath(b.file.Etag())
		if err := hfcache.RemoveIfExists(recordPath(partial)); err != nil {
			return fmt.Errorf("download: remove stale resume record: %w", err)
		}
		if err := hfcache.RemoveIfExists(partial); err != nil {
			return fmt.Errorf("download: remove stale partial: %w", err)
		}
	}
	return nil
}

// finish records the revision (refs/<revision>) once every file is in
// place.
func (j *Job) finish(plan *Plan) error {
	if err := j.layout.Finish(plan.Revision, plan.Commit); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	return nil
}

// runOnce fetches until every blob is finished or ctx ends, then stops the
// workers, checkpoints what reached the disk and closes the files.
func (j *Job) runOnce(ctx context.Context, rs *runState) error {
	release, err := j.opts.KeepAwake("Downloading " + j.opts.Repo)
	if err != nil {
		j.emit(Event{Kind: EventWarning, Message: fmt.Sprintf("could not keep the machine awake while downloading: %v", err)})
		release = func() {}
	}
	defer release()

	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range j.opts.Connections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 512<<10)
			if err := j.worker(gctx, rs, buf); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	stopErr := j.stopAll(rs)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if cause := context.Cause(gctx); cause != nil {
		return cause
	}
	return stopErr
}

// decorate adds the figures a disk-full error tells the user: the bytes
// kept (what a new run credits: complete blobs and checkpointed ranges),
// the bytes left, and the space to free for the rest and the reserve.
func (j *Job) decorate(rs *runState, err error) error {
	var df *DiskFullError
	if !errors.As(err, &df) {
		return err
	}
	rs.mu.Lock()
	kept := rs.presentBase
	for _, t := range rs.tasks {
		if t.finished {
			kept += t.file.Size
		} else {
			kept += t.recorded.Len()
		}
	}
	rs.mu.Unlock()
	df.Kept, df.Left = kept, rs.total-kept
	df.Free = df.Left + j.reserveFor(df.Left)
	if ds, derr := j.opts.DiskFree(j.opts.CacheDir); derr == nil {
		df.Free = max(df.Free-clampInt64(ds.Available), 0)
	}
	return err
}

// worker takes pieces until there are none left.
func (j *Job) worker(ctx context.Context, rs *runState, buf []byte) error {
	for {
		t, p, err := rs.next(ctx)
		if err != nil || t == nil {
			return err
		}
		if err := j.activate(rs, t); err != nil {
			return err
		}
		if err := j.fetchPiece(ctx, rs, t, p, buf); err != nil {
			if errors.Is(err, errPieceCovered) || errors.Is(err, errPieceRequeued) {
				continue
			}
			return err
		}
		if err := j.pieceDone(ctx, rs, t, p); err != nil {
			return err
		}
	}
}

// next hands out the first pending piece in manifest order, waiting while
// pieces are only in flight; it returns a nil task when every blob is
// finished.
func (rs *runState) next(ctx context.Context) (*blobTask, *piece, error) {
	for {
		rs.mu.Lock()
		all := true
		for _, t := range rs.tasks {
			if t.finished {
				continue
			}
			all = false
			if (t.sequential || !t.rangesKnown) && len(t.inflight) > 0 {
				// One stream per blob whose server ignores ranges, and
				// one request until the first answer says which it is.
				continue
			}
			if len(t.pending) > 0 {
				if !t.admitted && rs.admit != nil && !rs.admit(t.file) {
					continue
				}
				t.admitted = true
				p := t.pending[0]
				t.pending = t.pending[1:]
				t.inflight[p] = true
				t.active = true
				rs.mu.Unlock()
				return t, p, nil
			}
		}
		ch := rs.changed
		rs.mu.Unlock()
		if all {
			return nil, nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-ch:
		}
	}
}

// Wake asks Options.Admit again about the blobs it refused: call it when
// its answer may have changed.
func (j *Job) Wake() {
	j.mu.Lock()
	rs := j.rs
	j.mu.Unlock()
	if rs == nil {
		return
	}
	rs.mu.Lock()
	rs.broadcast()
	rs.mu.Unlock()
}

// broadcast wakes workers waiting in next. Call with rs.mu held.
func (rs *runState) broadcast() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// activate opens a blob's partial file, takes its lock and makes sure a
// resume record describes the file before any byte is written to it.
func (j *Job) activate(rs *runState, t *blobTask) error {
	t.ioMu.Lock()
	defer t.ioMu.Unlock()
	if t.f != nil {
		return nil
	}
	if t.unlock == nil {
		unlock, err := lockBlob(j.layout.LockPath(t.file.Etag()))
		if err != nil {
			return fmt.Errorf("download: %s: %w", t.paths[0], err)
		}
		t.unlock = unlock
	}
	f, err := j.opts.Storage.OpenPartial(t.partialPath)
	if err != nil {
		return &writeError{t.partialPath, err}
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > t.file.Size {
		if err := f.Truncate(t.file.Size); err != nil {
			f.Close()
			return &writeError{t.partialPath, err}
		}
	}
	t.f = f
	return j.writeRecordLocked(rs, t)
}

// writeRecordLocked syncs the partial and records its done ranges. Call with
// t.ioMu held. It does nothing when the file is closed: the blob was
// published or thrown away since the caller's piece finished.
func (j *Job) writeRecordLocked(rs *runState, t *blobTask) error {
	if t.f == nil {
		return nil
	}
	// Copy the ranges before the sync: each range in t.done was completely
	// written before it was added, so the sync that follows covers every one.
	rs.mu.Lock()
	done := append(Ranges(nil), t.done...)
	rs.mu.Unlock()
	if err := t.f.Sync(); err != nil {
		return j.diskErr(t, err)
	}
	b, err := encodePartial(t.file.Etag(), t.file.Size, done)
	if err != nil {
		return fmt.Errorf("download: encode resume record of %s: %w", t.paths[0], err)
	}
	if err := atomicfile.WriteFile(t.recordPath, b, 0o644); err != nil {
		return j.diskErr(t, err)
	}
	rs.mu.Lock()
	t.recorded = done
	rs.mu.Unlock()
	return nil
}

func (j *Job) diskErr(t *blobTask, err error) error {
	if sysinfo.IsDiskFull(err) {
		return &DiskFullError{Path: t.partialPath, Err: err}
	}
	return &writeError{t.partialPath, err}
}

// diskMargin is the free space below which a download stops by itself,
// checkpointing while there is still room for its resume records.
const diskMargin = 64 << 20

// diskCheckInterval is the time between two free-space checks.
const diskCheckInterval = time.Second

// report publishes progress every ProgressInterval and checks free space
// every diskCheckInterval until ctx ends.
func (j *Job) report(ctx context.Context, rs *runState) {
	m := newMeter()
	tick := time.NewTicker(j.opts.ProgressInterval)
	defer tick.Stop()
	lastCheck := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			j.publishProgress(rs, m)
			if time.Since(lastCheck) >= diskCheckInterval {
				lastCheck = time.Now()
				j.checkFreeSpace()
			}
		}
	}
}

// checkFreeSpace stops the running fetch with a *DiskFullError when the
// volume is about to fill up.
func (j *Job) checkFreeSpace() {
	ds, err := j.opts.DiskFree(j.opts.CacheDir)
	if err != nil || clampInt64(ds.Available) >= diskMargin {
		return
	}
	j.mu.Lock()
	cancel := j.runCancel
	j.mu.Unlock()
	if cancel != nil {
		cancel(&DiskFullError{Path: j.opts.CacheDir,
			Err: fmt.Errorf("only %s free on the volume: stopped before it filled up", FormatBytes(clampInt64(ds.Available)))})
	}
}

// publishProgress computes progress, stores it for Progress and emits it.
func (j *Job) publishProgress(rs *runState, m *meter) {
	var p Progress
	if m == nil {
		p = j.progressNow(rs)
	} else {
		p = rs.snapshot(m, time.Now())
	}
	j.mu.Lock()
	j.last = p
	j.mu.Unlock()
	j.emit(Event{Kind: EventProgress, Progress: p})
}

// progressNow computes current figures for an event, keeping the rate of
// the last report.
func (j *Job) progressNow(rs *runState) Progress {
	p := rs.snapshot(nil, time.Now())
	j.mu.Lock()
	p.Rate, p.ETASeconds = j.last.Rate, 0
	j.mu.Unlock()
	if p.Rate > 0 && p.Done < p.Total {
		p.ETASeconds = float64(p.Total-p.Done) / p.Rate
	}
	return p
}
