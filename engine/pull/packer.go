package pull

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/packed"
)

// Run downloads what is missing and packs every shard as it arrives (see
// the package comment); it returns nil once every file is in place and
// every shard with experts is packed (and released, unless the originals
// are kept). It refuses with a *download.PreflightError, before any
// payload byte, when the volume lacks the space. On any other end it
// keeps everything done so far: a later Run resumes.
func (p *Puller) Run(ctx context.Context) error {
	plan, err := p.Plan(ctx)
	if err != nil {
		return err
	}
	if !plan.Preflight.OK {
		return &download.PreflightError{Preflight: plan.Preflight}
	}
	dir := plan.ModelDir
	if err := os.MkdirAll(workDir(dir), 0o755); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	unlock, err := packed.Lock(dir)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := p.record(plan)
	if err != nil {
		return err
	}
	// Packing needs every shard's header; without them (not a
	// safetensors model) the files are stored as they come.
	disabled := plan.Estimate.From != "headers"
	if !disabled {
		var absent []string
		for _, f := range rec.Files {
			if f.Shard && f.Stage == packed.Absent {
				absent = append(absent, f.Name)
			}
		}
		if err := p.writePlaceholders(ctx, plan, absent); err != nil {
			return fmt.Errorf("pull: %w", err)
		}
	} else {
		p.warn("the shards' headers could not be read: the files are stored as they are, not packed")
	}
	k := &packer{p: p, dir: dir, rec: rec, placed: make(chan []string, len(plan.Files)+1), done: map[string]bool{},
		release: !p.opts.KeepOriginal, disabled: disabled}
	p.mu.Lock()
	p.packer = k
	p.inflight, p.admitted = map[string]bool{}, map[string]bool{}
	p.unbounded = disabled
	for _, f := range rec.Files {
		if !f.Shard {
			continue
		}
		switch f.Stage {
		case packed.Present, packed.Packed, packed.Releasing:
			p.admitted[f.Name] = true
			if !p.opts.KeepOriginal {
				p.inflight[f.Name] = true
			}
		case packed.Released:
			p.admitted[f.Name] = true
		}
	}
	p.packing = PackProgress{KeepOriginal: p.opts.KeepOriginal, Expected: plan.Estimate.Stored}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.packer = nil
		p.mu.Unlock()
		k.close()
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	downloaded := make(chan struct{})
	packErr := make(chan error, 1)
	go func() { packErr <- k.run(ctx, downloaded) }()
	if err := p.job.Run(ctx); err != nil {
		cancel()
		if perr := <-packErr; perr != nil && !errors.Is(perr, context.Canceled) {
			return perr
		}
		return err
	}
	close(downloaded)
	if err := <-packErr; err != nil {
		return err
	}
	// Done: the partial files, locks and placeholders go.
	if err := os.RemoveAll(workDir(dir)); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	return nil
}

// record loads the model's record, or makes it from the plan, with every
// file already in place present.
func (p *Puller) record(plan *Plan) (*packed.Record, error) {
	dir := plan.ModelDir
	rec, err := packed.ReadRecord(dir)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		rec = &packed.Record{
			Origin:       &packed.Origin{Repo: p.opts.Repo, Revision: plan.Revision, Commit: plan.Commit},
			KeepOriginal: p.opts.KeepOriginal,
		}
	}
	if rec.KeepOriginal != p.opts.KeepOriginal {
		return nil, fmt.Errorf("pull: %s was started %s keeping the original files; continue it the same way, or delete the directory",
			dir, map[bool]string{true: "with", false: "without"}[rec.KeepOriginal])
	}
	for _, f := range plan.Files {
		rf, ok := rec.File(f.Path)
		if !ok {
			nf := packed.File{Name: f.Path, Size: f.Size, Etag: f.Etag, Shard: isShard(f.Path), Stage: packed.Absent}
			if f.LFS {
				nf.SHA256 = f.Etag
			}
			rec.Files = append(rec.Files, nf)
			rf, _ = rec.File(f.Path)
		}
		if rf.Stage == packed.Absent && f.Status == download.FileComplete {
			if err := p.linkOriginal(plan.SnapshotDir, f.Path); err != nil {
				return nil, err
			}
			rf.Stage = packed.Present
		}
	}
	if err := rec.Write(dir); err != nil {
		return nil, err
	}
	return rec, nil
}

// linkOriginal, when the originals are kept, links the store's file to the
// Hugging Face cache's.
func (p *Puller) linkOriginal(snapshot, path string) error {
	if !p.opts.KeepOriginal {
		return nil
	}
	dst := filepath.Join(p.modelDir(), filepath.FromSlash(path))
	target := filepath.Join(snapshot, filepath.FromSlash(path))
	if cur, err := os.Readlink(dst); err == nil && cur == target {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	tmp := dst + ".spool-link"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	return nil
}

// writePlaceholders makes the placeholder of every shard named, from the
// headers the plan read (or the hub).
func (p *Puller) writePlaceholders(ctx context.Context, plan *Plan, names []string) error {
	var files []hub.File
	for _, name := range names {
		for _, f := range plan.Files {
			if f.Path == name {
				files = append(files, hubFile(f))
			}
		}
	}
	return placeholders(ctx, p.opts.Client, p.opts.Repo, plan.Commit, plan.ModelDir, files, p.knownHeaders())
}

func (p *Puller) knownHeaders() map[string][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string][]byte, len(p.headers))
	for k, v := range p.headers {
		out[k] = v
	}
	return out
}

// packer packs the shards of one Run as they arrive.
type packer struct {
	p       *Puller
	dir     string
	rec     *packed.Record
	placed  chan []string // files in place, from the download's workers
	release bool
	// disabled: nothing is packed (the shards are not a model's); shards
	// are done once in place.
	disabled bool

	c    *container.Container
	cfg  *config.Config
	cv   *packed.Converter
	done map[string]bool // shards finished (or without experts)
}

func (k *packer) close() {
	if k.c != nil {
		k.c.Close()
	}
}

// run packs until every shard is done and downloaded is closed.
func (k *packer) run(ctx context.Context, downloaded <-chan struct{}) error {
	finished := false
	for {
		if err := k.absorb(); err != nil {
			return k.fail(err)
		}
		if err := k.open(); err != nil {
			return k.fail(err)
		}
		progressed, err := k.step(ctx)
		if err != nil {
			return k.fail(err)
		}
		if progressed {
			continue
		}
		if finished && k.allDone() {
			return nil
		}
		if finished {
			return k.fail(fmt.Errorf("internal error: every file is in place but shards are left unpacked"))
		}
		k.unblock()
		select {
		case paths := <-k.placed:
			if err := k.markPresent(paths); err != nil {
				return k.fail(err)
			}
		case <-downloaded:
			finished, downloaded = true, nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fail stops the download: its bytes are kept, a new Run resumes.
func (k *packer) fail(err error) error {
	if !errors.Is(err, context.Canceled) {
		k.p.job.Cancel()
	}
	return err
}

// absorb takes every notification waiting.
func (k *packer) absorb() error {
	for {
		select {
		case paths := <-k.placed:
			if err := k.markPresent(paths); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// markPresent records files in place, and points the container at them.
func (k *packer) markPresent(paths []string) error {
	changed := false
	for _, path := range paths {
		f, ok := k.rec.File(path)
		if !ok || f.Stage != packed.Absent {
			continue
		}
		if err := k.p.linkOriginal(k.snapshot(), path); err != nil {
			return err
		}
		f.Stage = packed.Present
		changed = true
		if f.Shard && k.release {
			// Raw on disk until released (one the job resumed without
			// asking counts from now).
			k.p.mu.Lock()
			if !k.p.unbounded {
				k.p.inflight[path], k.p.admitted[path] = true, true
			}
			k.p.mu.Unlock()
		}
		if f.Shard && k.c != nil {
			if err := k.c.ReplaceShard(path, filepath.Join(k.dir, path)); err != nil {
				return fmt.Errorf("pull: %w", err)
			}
		}
	}
	if !changed {
		return nil
	}
	return k.rec.Write(k.dir)
}

func (k *packer) snapshot() string {
	return download.HubCache(k.p.opts.CacheDir, k.p.opts.Repo).Dir(k.rec.Origin.Commit)
}

// open opens the model (shards not in place read from their
// placeholders) once its config is in place.
func (k *packer) open() error {
	if k.c != nil || k.disabled {
		return nil
	}
	if f, ok := k.rec.File("config.json"); !ok || f.Stage == packed.Absent {
		return nil
	}
	cfg, err := config.Load(k.dir)
	if err != nil {
		return err
	}
	paths := map[string]string{}
	for _, f := range k.rec.Files {
		if !f.Shard {
			continue
		}
		if f.Stage == packed.Absent {
			paths[f.Name] = placeholderPath(k.dir, f.Name)
		} else {
			paths[f.Name] = filepath.Join(k.dir, f.Name)
		}
	}
	c, err := container.OpenFiles(k.dir, paths)
	if err != nil {
		return err
	}
	if _, err := container.Validate(c, cfg); err != nil {
		c.Close()
		return err
	}
	k.c, k.cfg = c, cfg
	k.cv = packed.NewConverter(k.dir, c, cfg, k.rec, packed.Options{
		Release: k.release, Workers: k.p.opts.Pack.Workers, Force: k.p.opts.Pack.Force, OnExpert: k.p.opts.Pack.OnExpert,
	})
	shards := 0
	for _, f := range k.rec.Files {
		if !f.Shard {
			continue
		}
		src, err := k.cv.Sources(f.Name)
		if err != nil {
			return err
		}
		if len(src) > 0 {
			shards++
		}
	}
	k.p.mu.Lock()
	k.p.packing.Shards = shards
	k.p.mu.Unlock()
	return nil
}

// step packs the first shard that is ready; it reports whether it did.
func (k *packer) step(ctx context.Context) (bool, error) {
	if k.disabled {
		for _, f := range k.rec.Files {
			if f.Shard && !k.done[f.Name] && f.Stage != packed.Absent {
				k.done[f.Name] = true
				return true, nil
			}
		}
		return false, nil
	}
	if k.cv == nil {
		return false, nil
	}
	for _, f := range k.rec.Files {
		if !f.Shard || k.done[f.Name] || f.Stage == packed.Absent {
			continue
		}
		src, err := k.cv.Sources(f.Name)
		if err != nil {
			return false, err
		}
		ready := true
		for _, s := range src {
			if sf, _ := k.rec.File(s); sf.Stage == packed.Absent {
				ready = false
			}
		}
		if !ready {
			continue
		}
		k.p.mu.Lock()
		k.p.packing.Shard = f.Name
		k.p.mu.Unlock()
		r, err := k.cv.Shard(ctx, f.Name)
		if errors.Is(err, packed.ErrCannotRelease) {
			// The packs work; the raw bytes keep their space.
			k.release = false
			k.cv = packed.NewConverter(k.dir, k.c, k.cfg, k.rec, packed.Options{Workers: k.p.opts.Pack.Workers, Force: k.p.opts.Pack.Force, OnExpert: k.p.opts.Pack.OnExpert})
			k.p.warn(err.Error())
			err = nil
		}
		if err != nil {
			return false, err
		}
		k.finished(f.Name, r, len(src) > 0)
		return true, nil
	}
	return false, nil
}

// finished books a shard done: its pack's bytes in the progress, its raw
// bytes out of the window.
func (k *packer) finished(name string, r packed.ShardResult, hasExperts bool) {
	k.done[name] = true
	var raw, pk int64
	if hasExperts && r.Pack != "" {
		if x, err := expertpack.ReadIndex(r.Pack); err == nil {
			for _, e := range x.Entries {
				if loc, err := k.c.Expert(e.Layer, e.Expert, k.cfg); err == nil {
					raw += loc.Bytes()
				}
				pk += e.Length
			}
		}
	}
	disk, _ := packed.DiskUsage(k.dir)
	k.p.mu.Lock()
	delete(k.p.inflight, name)
	if hasExperts {
		k.p.packing.Done++
		k.p.packing.RawBytes += raw
		k.p.packing.PackedBytes += pk
	}
	k.p.packing.DiskBytes = disk
	k.p.packing.Expected = k.p.expectedLocked()
	k.p.mu.Unlock()
	k.p.job.Wake()
	if hasExperts {
		k.p.emitPack()
	}
}

// allDone reports whether every shard is done.
func (k *packer) allDone() bool {
	for _, f := range k.rec.Files {
		if f.Shard && !k.done[f.Name] {
			return false
		}
	}
	return true
}

// unblock widens the window when every shard on disk raw waits for one
// that may not start (an expert whose bytes lie further ahead).
func (k *packer) unblock() {
	k.p.mu.Lock()
	defer k.p.mu.Unlock()
	if len(k.p.inflight) < k.p.win {
		return
	}
	for name := range k.p.inflight {
		if f, ok := k.rec.File(name); !ok || f.Stage == packed.Absent {
			return // still downloading: it will come
		}
	}
	k.p.win++
	go k.p.job.Wake()
}

// expectedLocked is what the model will take when done, at the ratio
// measured so far. Call with p.mu held.
func (p *Puller) expectedLocked() int64 {
	ratio := AssumedRatio
	if p.packing.RawBytes > 0 {
		ratio = float64(p.packing.PackedBytes) / float64(p.packing.RawBytes)
	}
	if p.opts.KeepOriginal {
		ratio += 1
	}
	var n int64
	for _, s := range p.splits {
		n += s.other + int64(ratio*float64(s.experts))
	}
	if n == 0 {
		return p.packing.Expected
	}
	return n
}

// warn reports something degraded that does not stop the pull.
func (p *Puller) warn(msg string) {
	if p.opts.OnEvent == nil {
		return
	}
	pp := p.Packing()
	e := Event{Event: download.Event{Kind: download.EventWarning, Time: time.Now(), Message: msg, Progress: p.job.Progress()}, Pack: &pp}
	p.emitMu.Lock()
	defer p.emitMu.Unlock()
	p.opts.OnEvent(e)
}
