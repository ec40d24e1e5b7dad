package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/packed"
	"github.com/spoolhq/spool/engine/pull"
	"github.com/spoolhq/spool/engine/server"
)

// planTimeout bounds listing the artifact's files on the hub.
const planTimeout = 30 * time.Second

// Where the download's folder came from (downloadStatus.CacheSource).
const (
	cacheFromEnv      = "environment" // Spool's store (SPOOL_STORE or its default), or the Hugging Face cache (HF_HUB_CACHE, HF_HOME or their default) when the originals are kept
	cacheFromSettings = "settings"    // chosen in the app
)

// downloadManager runs at most one download of the pinned artifact for the
// UI's Model page: it plans (file list, preflight, the disk the model will
// take) on request, runs, pauses, resumes and cancels the pull, and
// publishes its events on the websocket as {"type":"download","data":
// <pull.Event>}. The model is packed as it downloads into Spool's store
// (engine/pull), unless the original files are kept for other tools: then
// they go to the Hugging Face cache, and the store keeps the packs. The
// folder is the store (or that cache) unless another one was chosen.
// Close stops it.
type downloadManager struct {
	repo, revision string
	publish        func(server.Event)
	ctx            context.Context
	cancel         context.CancelFunc
	wg             sync.WaitGroup

	mu           sync.Mutex
	cacheDir     string
	cacheSource  string
	keepOriginal bool
	job          *pull.Puller
	plan         *pull.Plan
	planning     bool
	planErr      string
	running      bool
	runErr       string
	last         *pull.Event
	// seq counts the events published: a status carries the count it
	// saw, so the UI can tell a status read before an event it already
	// applied (a poll or an action's answer overtaken by the websocket)
	// from a newer one.
	seq uint64
}

func newDownloadManager(publish func(server.Event)) *downloadManager {
	ctx, cancel := context.WithCancel(context.Background())
	d := &downloadManager{repo: download.DefaultRepo, revision: download.DefaultRevision, publish: publish, ctx: ctx, cancel: cancel, cacheSource: cacheFromEnv}
	d.cacheDir = d.defaultFolder()
	return d
}

// defaultFolder is where the download goes unless one was chosen: the
// store, or the Hugging Face cache when the originals are kept. Call with
// d.mu held (or before d is shared).
func (d *downloadManager) defaultFolder() string {
	if !d.keepOriginal {
		return pull.DefaultStore()
	}
	if env, err := hub.EnvFromOS(); err == nil {
		return env.CacheDir
	}
	return ""
}

// Close cancels a running download (its progress stays on disk) and waits.
func (d *downloadManager) Close() {
	d.cancel()
	d.wg.Wait()
}

// downloadStatus is GET /ui/download.
type downloadStatus struct {
	Repo        string `json:"repo"`
	Revision    string `json:"revision"`
	CacheDir    string `json:"cache_dir"`
	CacheSource string `json:"cache_source"`
	// KeepOriginal: the original files go to the Hugging Face cache for
	// other tools, and the store keeps the packs beside them.
	KeepOriginal bool           `json:"keep_original"`
	Disk         map[string]any `json:"disk"`
	Planning     bool           `json:"planning"`
	Plan         *pull.Plan     `json:"plan,omitempty"`
	// Pack is how far packing got.
	Pack    *pull.PackProgress `json:"pack,omitempty"`
	PlanErr string             `json:"plan_error,omitempty"`
	State   download.State     `json:"state"`
	Running bool               `json:"running"`
	Error   string             `json:"error,omitempty"`
	Last    *pull.Event        `json:"last,omitempty"`
	// Seq is the number of events published before this status was read.
	Seq uint64 `json:"seq"`
	// ModelDir is where the finished download is loaded from.
	ModelDir string `json:"model_dir,omitempty"`
}

// Status reports the plan, the state and the latest progress. A plan that
// finds every file already in the cache is done.
func (d *downloadManager) Status() downloadStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := downloadStatus{
		Repo: d.repo, Revision: d.revision, CacheDir: d.cacheDir, CacheSource: d.cacheSource, KeepOriginal: d.keepOriginal,
		Planning: d.planning, Plan: d.plan, PlanErr: d.planErr, State: download.StateIdle, Running: d.running, Error: d.runErr,
		Last: d.last, Seq: d.seq,
	}
	if d.cacheDir != "" {
		st.Disk = diskFree(existingParent(d.cacheDir))
	}
	if d.job != nil {
		st.State = d.job.State()
		if pk := d.job.Packing(); pk.Shards > 0 {
			st.Pack = &pk
		}
	}
	done := d.plan != nil && d.plan.Complete() && packedReady(d.plan.ModelDir)
	if !d.running && done {
		st.State = download.StateDone
	} else if st.State == download.StateDone && !done {
		// Downloaded, not all packed yet: resuming finishes it.
		st.State = download.StateIdle
	}
	if st.State == download.StateDone && d.plan != nil {
		st.ModelDir = d.plan.ModelDir
	}
	return st
}

// SetCacheDir makes dir the folder the download goes to, from source
// (dir "" with source cacheFromEnv: the default one); the plan is dropped
// (free space and present files differ there). It refuses while a
// download runs.
func (d *downloadManager) SetCacheDir(dir, source string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return errors.New("pause or cancel the download before choosing another folder")
	}
	if dir == "" {
		dir, source = d.defaultFolder(), cacheFromEnv
	}
	d.cacheDir, d.cacheSource = dir, source
	d.job, d.plan, d.planErr, d.runErr, d.last = nil, nil, "", "", nil
	return nil
}

// SetKeepOriginal says whether the original files are kept for other
// tools; the plan is dropped (the disk needed differs). It refuses while a
// download runs.
func (d *downloadManager) SetKeepOriginal(keep bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return errors.New("pause or cancel the download before changing where it goes")
	}
	if keep == d.keepOriginal {
		return nil
	}
	d.keepOriginal = keep
	if d.cacheSource == cacheFromEnv {
		d.cacheDir = d.defaultFolder()
	}
	d.job, d.plan, d.planErr, d.runErr, d.last = nil, nil, "", "", nil
	return nil
}

// packedReady reports whether the model in dir is stored whole: its record
// says every file is in place, and the pull that packs it finished (its
// work directory is gone).
func packedReady(dir string) bool {
	rec, err := packed.ReadRecord(dir)
	if err != nil || rec == nil || rec.Ready(dir) != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, ".spool-download"))
	return errors.Is(err, os.ErrNotExist)
}

// existingParent is dir or its nearest existing parent: a folder not made
// yet is measured on the volume it will be on.
func existingParent(dir string) string {
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil || p == filepath.Dir(p) {
			return p
		}
	}
}

// Do runs an action: plan, start, pause, resume or cancel.
func (d *downloadManager) Do(action string) error {
	switch action {
	case "plan":
		return d.startPlan()
	case "start":
		return d.start()
	case "pause", "resume", "cancel":
		d.mu.Lock()
		job, running := d.job, d.running
		d.mu.Unlock()
		if job == nil || !running {
			return fmt.Errorf("no download is running to %s", action)
		}
		switch action {
		case "pause":
			job.Pause()
		case "resume":
			job.Resume()
		default:
			job.Cancel()
		}
		return nil
	}
	return fmt.Errorf("unknown download action %q (plan, start, pause, resume, cancel)", action)
}

// newJob builds a pull for the folder from the environment (HF_ENDPOINT,
// HF_TOKEN, ...). Call with d.mu held.
func (d *downloadManager) newJob() (*pull.Puller, error) {
	env, err := hub.EnvFromOS()
	if err != nil {
		return nil, err
	}
	if env.Offline {
		return nil, errors.New("HF_HUB_OFFLINE is set: listing the files needs the hub")
	}
	if d.cacheDir == "" {
		d.cacheDir = d.defaultFolder()
	}
	opts := pull.Options{Repo: d.repo, Revision: d.revision, Client: hub.NewClient(env), OnEvent: d.onEvent}
	if d.keepOriginal {
		opts.KeepOriginal, opts.CacheDir = true, d.cacheDir
	} else {
		opts.Store = d.cacheDir
	}
	return pull.New(opts)
}

// downloadEvent is a pull event as the websocket publishes it: with its
// place in the sequence (downloadStatus.Seq).
type downloadEvent struct {
	pull.Event
	Seq uint64 `json:"seq"`
}

func (d *downloadManager) onEvent(ev pull.Event) {
	d.mu.Lock()
	d.last = &ev
	d.seq++
	seq := d.seq
	d.mu.Unlock()
	if d.publish != nil {
		d.publish(server.Event{Type: "download", Data: downloadEvent{Event: ev, Seq: seq}})
	}
}

// startPlan lists the files again (with a new job, so that the listing is
// fresh) unless a download runs.
func (d *downloadManager) startPlan() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.planning || d.running {
		return nil
	}
	job, err := d.newJob()
	if err != nil {
		d.planErr = err.Error()
		return nil
	}
	d.job, d.last, d.runErr = job, nil, ""
	d.planning, d.planErr = true, ""
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		ctx, cancel := context.WithTimeout(d.ctx, planTimeout)
		defer cancel()
		p, err := job.Plan(ctx)
		d.mu.Lock()
		defer d.mu.Unlock()
		d.planning = false
		if d.job != job {
			return // another folder was chosen meanwhile
		}
		if err != nil {
			d.planErr = err.Error()
			return
		}
		d.plan = p
	}()
	return nil
}

func (d *downloadManager) start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.running:
		return nil
	case d.plan == nil || d.job == nil:
		return errors.New("check the plan and the free space first")
	case !d.plan.Preflight.OK:
		return errors.New(d.plan.Preflight.Message)
	}
	if s := d.job.State(); s == download.StateCancelled || s == download.StateFailed {
		// A stopped job stays stopped; a new one resumes its bytes.
		job, err := d.newJob()
		if err != nil {
			return err
		}
		d.job = job
	}
	d.running, d.runErr = true, ""
	job := d.job
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		err := job.Run(d.ctx)
		var p *pull.Plan
		if err == nil {
			// The plan now says what is on disk: everything.
			pctx, cancel := context.WithTimeout(d.ctx, planTimeout)
			p, _ = job.Plan(pctx)
			cancel()
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.running = false
		if p != nil && d.job == job {
			d.plan = p
		}
		if err != nil && !errors.Is(err, download.ErrCancelled) {
			d.runErr = err.Error()
		}
	}()
	return nil
}

// checkFolder makes sure dir can hold the download: an absolute path to a
// directory that exists (or can be made) and can be written.
func checkFolder(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("choose a folder")
	}
	if len(dir) > 1 && dir[0] == '~' && (dir[1] == '/' || dir[1] == filepath.Separator) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, dir[2:])
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%q is not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cannot use %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".spool-write-check-*")
	if err != nil {
		return "", fmt.Errorf("cannot write to %s: %w", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return dir, nil
}
