package download

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/internal/atomicfile"
	"github.com/spoolhq/spool/internal/bytesize"
)

// FileStatus says how much of a file is already in the cache.
type FileStatus string

const (
	FileComplete FileStatus = "complete" // the blob is in the cache
	FilePartial  FileStatus = "partial"  // part of the blob is on disk and will be resumed
	FileMissing  FileStatus = "missing"  // nothing of it is on disk
)

// PlannedFile is one file of a plan.
type PlannedFile struct {
	Path    string     `json:"path"`
	Size    int64      `json:"size"`
	Etag    string     `json:"etag"` // blob name: LFS sha256 or git blob sha1
	LFS     bool       `json:"lfs"`
	Present int64      `json:"present"` // bytes already on disk and credited
	Status  FileStatus `json:"status"`
}

// Plan is what a download will do, computed before any payload byte moves.
type Plan struct {
	Repo        string        `json:"repo"`
	Revision    string        `json:"revision"`
	Commit      string        `json:"commit"`
	CacheDir    string        `json:"cache_dir"`
	SnapshotDir string        `json:"snapshot_dir"`
	Files       []PlannedFile `json:"files"`
	TotalBytes  int64         `json:"total_bytes"`   // sum of the file sizes
	BlobBytes   int64         `json:"blob_bytes"`    // bytes of distinct blobs (files with equal content share one)
	Present     int64         `json:"present_bytes"` // bytes of distinct blobs already on disk
	ToFetch     int64         `json:"to_fetch"`      // bytes still to download
	Preflight   Preflight     `json:"preflight"`

	blobs []*plannedBlob
}

// Complete reports whether every file is already in the cache.
func (p *Plan) Complete() bool { return p.ToFetch == 0 && p.allBlobsDone() }

func (p *Plan) allBlobsDone() bool {
	for _, b := range p.blobs {
		if !b.complete {
			return false
		}
	}
	return true
}

// plannedBlob is one distinct blob and what of it is on disk.
type plannedBlob struct {
	file     hub.File
	paths    []string
	complete bool
	done     Ranges // credited ranges of the partial
	foreign  bool   // a .incomplete with no resume record: its length is credited as a prefix
}

// Preflight compares the bytes a download needs with the free space of the
// volume that holds the cache.
type Preflight struct {
	Volume    string `json:"volume"`    // the existing directory whose volume was measured
	ToFetch   int64  `json:"to_fetch"`  // bytes to download
	Reserve   int64  `json:"reserve"`   // bytes kept free beyond the download
	Required  int64  `json:"required"`  // ToFetch + Reserve
	Available int64  `json:"available"` // writable now (statfs)
	// Important is the space for a user-requested download, counting
	// purgeable space that macOS frees on demand; equals Available elsewhere.
	Important int64 `json:"important"`
	// Checked is false when free space could not be measured (Message says
	// why); the download is then allowed.
	Checked bool `json:"checked"`
	OK      bool `json:"ok"`
	// Purge is true when the download fits only once macOS frees purgeable
	// space (Available < Required <= Important).
	Purge   bool   `json:"purge"`
	Message string `json:"message"`
}

// PreflightError is returned by Run when the volume has too little space.
type PreflightError struct{ Preflight Preflight }

func (e *PreflightError) Error() string { return "download: " + e.Preflight.Message }

// Plan lists the revision's files from the hub (once per job), credits what
// the cache already holds (complete blobs and checkpointed ranges of
// partials) and checks free space. It writes nothing.
func (j *Job) Plan(ctx context.Context) (*Plan, error) {
	m, err := j.loadManifest(ctx)
	if err != nil {
		return nil, err
	}
	plan := &Plan{
		Repo: j.opts.Repo, Revision: j.opts.Revision, Commit: m.Commit,
		CacheDir: j.opts.CacheDir, SnapshotDir: j.cache.SnapshotDir(m.Commit),
	}
	byEtag := map[string]*plannedBlob{}
	for _, f := range m.Files {
		plan.TotalBytes += f.Size
		b := byEtag[f.Etag()]
		if b == nil {
			if b, err = j.inspect(f); err != nil {
				return nil, err
			}
			byEtag[f.Etag()] = b
			plan.blobs = append(plan.blobs, b)
			plan.BlobBytes += f.Size
		} else if b.file.Size != f.Size {
			return nil, fmt.Errorf("download: %s and %s share blob %s but have sizes %d and %d",
				b.paths[0], f.Path, f.Etag(), b.file.Size, f.Size)
		} else {
			b.paths = append(b.paths, f.Path)
		}
		pf := PlannedFile{Path: f.Path, Size: f.Size, Etag: f.Etag(), LFS: f.LFS(), Status: FileMissing}
		switch {
		case b.complete:
			pf.Present, pf.Status = f.Size, FileComplete
		case b.done.Len() > 0:
			pf.Present, pf.Status = b.done.Len(), FilePartial
		}
		plan.Files = append(plan.Files, pf)
	}
	for _, b := range plan.blobs {
		if b.complete {
			plan.Present += b.file.Size
		} else {
			plan.Present += b.done.Len()
		}
	}
	plan.ToFetch = plan.BlobBytes - plan.Present
	plan.Preflight = j.preflight(plan.ToFetch)
	return plan, nil
}

func (j *Job) loadManifest(ctx context.Context) (*hub.Manifest, error) {
	j.mu.Lock()
	m := j.manifest
	j.mu.Unlock()
	if m != nil {
		return m, nil
	}
	var err error
	for failures := 1; ; failures++ {
		m, err = j.opts.Client.Manifest(ctx, j.opts.Repo, j.opts.Revision)
		if err == nil {
			break
		}
		if ctx.Err() != nil || !transient(err) || failures > j.opts.MaxRetries {
			return nil, fmt.Errorf("download: %w", err)
		}
		wait := j.backoff(failures, err)
		j.emit(Event{Kind: EventRetry, RetryIn: wait.Seconds(),
			Message: fmt.Sprintf("listing files: %v; retry %d in %s", err, failures, wait.Round(time.Millisecond))})
		if err := sleepCtx(ctx, wait); err != nil {
			return nil, fmt.Errorf("download: %w", err)
		}
	}
	j.mu.Lock()
	j.manifest = m
	j.mu.Unlock()
	return m, nil
}

// inspect finds what the cache holds of f's blob.
func (j *Job) inspect(f hub.File) (*plannedBlob, error) {
	etag := f.Etag()
	b := &plannedBlob{file: f, paths: []string{f.Path}}
	if j.cache.HasBlob(etag, f.Size) {
		b.complete = true
		return b, nil
	}
	partial := j.cache.IncompletePath(etag)
	fi, err := os.Stat(partial)
	if errors.Is(err, fs.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("download: inspect partial %s: %w", partial, err)
	}
	atomicfile.Sweep(recordPath(partial)) // records whose save a kill cut short
	rec, err := os.ReadFile(recordPath(partial))
	switch {
	case err == nil:
		done, perr := parsePartial(rec, etag, f.Size)
		if perr != nil {
			// A damaged record credits nothing; the partial is rewritten.
			return b, nil
		}
		b.done = done.Clip(fi.Size())
	case errors.Is(err, fs.ErrNotExist):
		// A partial written front to back by another tool (older
		// huggingface_hub appended to blobs/<etag>.incomplete): its length
		// is a prefix candidate; verification decides.
		if n := min(fi.Size(), f.Size); n > 0 {
			b.done = Ranges{{0, n}}
		}
		b.foreign = true
	default:
		return nil, fmt.Errorf("download: read resume record of %s: %w", partial, err)
	}
	return b, nil
}

// recordPath is the resume record of a partial blob.
func recordPath(partial string) string { return partial + ".spool.json" }

// reserveFor is the free space kept beyond toFetch bytes.
func (j *Job) reserveFor(toFetch int64) int64 {
	switch {
	case toFetch == 0 || j.opts.Reserve < 0:
		return 0
	case j.opts.Reserve > 0:
		return j.opts.Reserve
	}
	return max(MinReserve, toFetch/100)
}

func (j *Job) preflight(toFetch int64) Preflight {
	pf := Preflight{ToFetch: toFetch, Reserve: j.reserveFor(toFetch)}
	pf.Required = pf.ToFetch + pf.Reserve
	ds, err := j.opts.DiskFree(j.opts.CacheDir)
	if err != nil {
		pf.OK = true
		pf.Message = fmt.Sprintf("could not measure free space for %s (%v); going ahead with %s to download", j.opts.CacheDir, err, FormatBytes(toFetch))
		return pf
	}
	pf.Checked = true
	pf.Volume = ds.Path
	pf.Available = clampInt64(ds.Available)
	pf.Important = max(clampInt64(ds.Important), pf.Available)
	need := fmt.Sprintf("%s (%s to download + %s reserve)", FormatBytes(pf.Required), FormatBytes(pf.ToFetch), FormatBytes(pf.Reserve))
	switch {
	case pf.Required <= pf.Available:
		pf.OK = true
		pf.Message = fmt.Sprintf("enough space on the volume of %s: needs %s, %s available", pf.Volume, need, FormatBytes(pf.Available))
	case pf.Required <= pf.Important:
		pf.OK, pf.Purge = true, true
		pf.Message = fmt.Sprintf("enough space on the volume of %s once macOS frees purgeable space: needs %s, %s available now, %s counting purgeable space",
			pf.Volume, need, FormatBytes(pf.Available), FormatBytes(pf.Important))
	default:
		have := FormatBytes(pf.Available)
		if pf.Important > pf.Available {
			have += fmt.Sprintf(" (%s counting purgeable space)", FormatBytes(pf.Important))
		}
		pf.Message = fmt.Sprintf("not enough free space on the volume of %s: this download needs %s but the volume has %s available. "+
			"Free at least %s there, or set HF_HUB_CACHE (or HF_HOME) to a directory on a larger volume, then run again",
			pf.Volume, need, have, FormatBytes(pf.Required-pf.Important))
	}
	return pf
}

func clampInt64(v uint64) int64 {
	if v > 1<<62 {
		return 1 << 62
	}
	return int64(v)
}

// FormatBytes writes n in decimal units as macOS shows sizes (1 GB = 10^9
// bytes), with one decimal: "383.8 GB" (bytesize.SI).
func FormatBytes(n int64) string { return bytesize.SI(n) }
