package pull

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/packed"
)

// DefaultWindow is the shards on disk raw at once: one being packed while
// the next downloads.
const DefaultWindow = 2

// Options configure a Puller. Repo and Client are required.
type Options struct {
	Repo     string
	Revision string // "" means "main"
	Client   *hub.Client
	// Store is Spool's store (DefaultStore when empty).
	Store string
	// KeepOriginal keeps the original files for other tools: they go to
	// the Hugging Face cache in CacheDir, and the store's directory holds
	// links to them and the packs.
	KeepOriginal bool
	CacheDir     string
	// Window is the shards on disk raw at once (DefaultWindow when 0).
	Window int
	// Pack tunes the packing (its Release is set by KeepOriginal).
	Pack packed.Options
	// Download tunes the download: its Connections, ChunkSize,
	// checkpoints, retries, Reserve, DiskFree, KeepAwake and Storage are
	// used; the rest is set here.
	Download download.Options
	// OnEvent receives every event, one call at a time; it must return
	// quickly. It may call Pause, Resume and Cancel.
	OnEvent func(Event)
}

// EventPack is the kind of an event that reports a shard packed.
const EventPack download.EventKind = "pack"

// Event is a download event, with the packing's progress.
type Event struct {
	download.Event
	Pack *PackProgress `json:"pack,omitempty"`
}

// PackProgress is how far packing got.
type PackProgress struct {
	// Shards counts the shards with routed experts, Done those packed
	// (and released, unless the originals are kept).
	Shards int `json:"shards"`
	Done   int `json:"done"`
	// RawBytes and PackedBytes are the experts packed so far, before and
	// after.
	RawBytes    int64 `json:"raw_bytes"`
	PackedBytes int64 `json:"packed_bytes"`
	// Shard is the one just packed (EventPack) or being packed.
	Shard string `json:"shard,omitempty"`
	// DiskBytes is what the model's directory takes on disk now;
	// Expected what it will take when done.
	DiskBytes int64 `json:"disk_bytes"`
	Expected  int64 `json:"expected_bytes"`
	// KeepOriginal: the packs sit beside the original files.
	KeepOriginal bool `json:"keep_original,omitempty"`
}

// Plan is a download plan with what the model will take in the store.
type Plan struct {
	*download.Plan
	// ModelDir is where the model is stored (and loaded from).
	ModelDir     string   `json:"model_dir"`
	KeepOriginal bool     `json:"keep_original"`
	Estimate     Estimate `json:"estimate"`
}

// Puller downloads one repository revision into the store, packing it.
// Plan and Run may be called from one goroutine; Pause, Resume, Cancel,
// State and Progress from any.
type Puller struct {
	opts Options

	mu      sync.Mutex
	job     *download.Job
	splits  map[string]splitOf // shard path -> its bytes, from its header
	headers map[string][]byte  // shard path -> its header, fetched
	dir     string             // the model directory, once the commit is known
	packing PackProgress
	// admission: shards raw on disk or on their way, not yet released.
	inflight map[string]bool
	admitted map[string]bool
	win      int
	packer   *packer
	// unbounded: nothing is packed, so nothing holds a shard back.
	unbounded bool

	emitMu sync.Mutex // one OnEvent call at a time
}

// New returns a Puller for opts.
func New(opts Options) (*Puller, error) {
	if opts.Client == nil {
		return nil, errors.New("pull: no hub client")
	}
	if opts.Store == "" {
		opts.Store = DefaultStore()
	}
	if opts.KeepOriginal && opts.CacheDir == "" {
		return nil, errors.New("pull: keeping the original files needs the Hugging Face cache's directory")
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	p := &Puller{opts: opts, splits: map[string]splitOf{}, headers: map[string][]byte{}, win: opts.Window}
	do := opts.Download
	do.Repo, do.Revision, do.Client = opts.Repo, opts.Revision, opts.Client
	do.Need = p.need
	do.OnEvent = p.onDownloadEvent
	if opts.KeepOriginal {
		do.CacheDir = opts.CacheDir
		do.Layout = notifyLayout{download.HubCache(opts.CacheDir, opts.Repo), p.placed}
	} else {
		do.CacheDir = opts.Store
		do.Layout = notifyLayout{&lazyLayout{p: p}, p.placed}
		do.Admit = p.admit
	}
	job, err := download.New(do)
	if err != nil {
		return nil, fmt.Errorf("pull: %w", err)
	}
	p.job = job
	return p, nil
}

// lazyLayout is the store layout of the model directory, known once the
// manifest names the commit.
type lazyLayout struct{ p *Puller }

func (l *lazyLayout) store() storeLayout {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return storeLayout{dir: l.p.dir}
}
func (l *lazyLayout) Dir(commit string) string {
	return ModelDir(l.p.opts.Store, l.p.opts.Repo, commit)
}
func (l *lazyLayout) PartialPath(etag string) string { return l.store().PartialPath(etag) }
func (l *lazyLayout) LockPath(etag string) string    { return l.store().LockPath(etag) }
func (l *lazyLayout) Complete(f hub.File) bool       { return l.store().Complete(f) }
func (l *lazyLayout) Place(commit string, f hub.File, paths []string, partial string) error {
	return l.store().Place(commit, f, paths, partial)
}
func (l *lazyLayout) Finish(string, string) error { return nil }

func (p *Puller) window() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.win
}

// State is the download's state.
func (p *Puller) State() download.State { return p.job.State() }

// Progress is the download's progress.
func (p *Puller) Progress() download.Progress { return p.job.Progress() }

// Packing is the packing's progress.
func (p *Puller) Packing() PackProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.packing
}

// Pause, Resume and Cancel act on the download (download.Job); packing
// goes on with the shards already there, and stops with Cancel.
func (p *Puller) Pause()  { p.job.Pause() }
func (p *Puller) Resume() { p.job.Resume() }
func (p *Puller) Cancel() { p.job.Cancel() }

// Plan lists the files, reads the shards' headers (to locate their
// experts and estimate the packed size) and checks free space. It writes
// nothing.
func (p *Puller) Plan(ctx context.Context) (*Plan, error) {
	// The commit first: the model directory and the record depend on it.
	dp, err := p.job.Plan(ctx)
	if err != nil {
		return nil, err
	}
	dir := ModelDir(p.opts.Store, p.opts.Repo, dp.Commit)
	p.mu.Lock()
	p.dir = dir
	p.mu.Unlock()
	if !p.opts.KeepOriginal {
		// Plan again now that the store layout knows its directory.
		if dp, err = p.job.Plan(ctx); err != nil {
			return nil, err
		}
	}
	p.readHeaders(ctx, dp)
	// Again, with the headers' split in the preflight.
	if dp, err = p.job.Plan(ctx); err != nil {
		return nil, err
	}
	return &Plan{Plan: dp, ModelDir: dir, KeepOriginal: p.opts.KeepOriginal, Estimate: p.estimate(dp)}, nil
}

// readHeaders fetches the header of every shard not known yet; a shard
// whose header cannot be read stays unknown (the estimate says so).
func (p *Puller) readHeaders(ctx context.Context, dp *download.Plan) {
	rec, _ := packed.ReadRecord(p.modelDir())
	mtp := p.mtpLayer(ctx, dp)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, f := range dp.Files {
		if !isShard(f.Path) {
			continue
		}
		p.mu.Lock()
		_, known := p.splits[f.Path]
		p.mu.Unlock()
		if known {
			continue
		}
		hf := hubFile(f)
		local := p.localHeaderPath(f.Path, rec)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var h []byte
			if local != "" {
				h, _ = readLocalHeader(local)
			}
			if h == nil {
				var err error
				if h, err = fetchHeader(ctx, p.opts.Client, p.opts.Repo, dp.Commit, hf); err != nil {
					return
				}
			}
			s, err := splitHeader(h, f.Size, mtp)
			if err != nil {
				return
			}
			p.mu.Lock()
			p.splits[f.Path], p.headers[f.Path] = s, h
			p.mu.Unlock()
		}()
	}
	wg.Wait()
}

// mtpLayer is the index of the model's MTP layer (its num_hidden_layers),
// from its config.json (on disk, or fetched: a few KB), or -1 when the
// config cannot be read.
func (p *Puller) mtpLayer(ctx context.Context, dp *download.Plan) int {
	for _, f := range dp.Files {
		if f.Path != "config.json" || f.Size > 1<<20 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.modelDir(), "config.json"))
		if err != nil || int64(len(b)) != f.Size {
			if b, err = fetchRange(ctx, p.opts.Client, p.opts.Repo, dp.Commit, hubFile(f), 0, f.Size); err != nil {
				return -1
			}
		}
		cfg, err := config.Parse(b, nil)
		if err != nil {
			return -1
		}
		return cfg.NumLayers
	}
	return -1
}

// localHeaderPath is a file on disk holding shard path's header: the
// shard itself or its placeholder ("" when neither is there).
func (p *Puller) localHeaderPath(path string, rec *packed.Record) string {
	dir := p.modelDir()
	if f, ok := rec.File(path); ok && f.Stage != packed.Absent {
		return filepath.Join(dir, filepath.FromSlash(path))
	}
	if _, err := os.Stat(placeholderPath(dir, path)); err == nil {
		return placeholderPath(dir, path)
	}
	return "" // the hub is asked
}

func readLocalHeader(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return readPrefix(f, st.Size())
}

func (p *Puller) modelDir() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dir
}

// ModelDir is the model's directory in the store ("" before Plan).
func (p *Puller) ModelDir() string { return p.modelDir() }

// measuredRatio is the packed over raw bytes of the shards packed so far
// in this model's directory.
func (p *Puller) measuredRatio() (float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.packing.RawBytes == 0 {
		return 0, false
	}
	return float64(p.packing.PackedBytes) / float64(p.packing.RawBytes), true
}

// packedAlready reports whether a shard's pack is written.
func (p *Puller) packedAlready(path string) bool {
	rec, _ := packed.ReadRecord(p.modelDir())
	f, ok := rec.File(path)
	return ok && f.Stage != packed.Absent && f.Stage != packed.Present
}

// admit is download.Options.Admit: a shard may start while fewer than the
// window are on disk raw. (A shard that had bytes on disk before the run
// starts without asking, and counts once in place.)
func (p *Puller) admit(f hub.File) bool {
	if !isShard(f.Path) {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.admitted[f.Path] || p.unbounded {
		return true
	}
	// The job asks in the manifest's order: a shard refused here keeps
	// every later one waiting too.
	if len(p.inflight) >= p.win {
		return false
	}
	p.admitted[f.Path], p.inflight[f.Path] = true, true
	return true
}

// placed hears, from the download's workers, that a file is in place.
func (p *Puller) placed(f hub.File, paths []string) {
	p.mu.Lock()
	pk := p.packer
	p.mu.Unlock()
	if pk != nil {
		pk.placed <- paths
	}
}

func (p *Puller) onDownloadEvent(e download.Event) {
	if p.opts.OnEvent == nil {
		return
	}
	pp := p.Packing()
	p.emitMu.Lock()
	defer p.emitMu.Unlock()
	p.opts.OnEvent(Event{Event: e, Pack: &pp})
}

// emitPack reports a shard packed.
func (p *Puller) emitPack() {
	if p.opts.OnEvent == nil {
		return
	}
	pp := p.Packing()
	e := Event{Event: download.Event{Kind: EventPack, Time: time.Now(), File: pp.Shard, Progress: p.job.Progress()}, Pack: &pp}
	p.emitMu.Lock()
	defer p.emitMu.Unlock()
	p.opts.OnEvent(e)
}
