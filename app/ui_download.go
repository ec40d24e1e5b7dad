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
	"github.com/spoolhq/spool/engine/server"
)

// planTimeout bounds listing the artifact's files on the hub.
const planTimeout = 30 * time.Second

// Where the download's cache folder came from (downloadStatus.CacheSource).
const (
	cacheFromEnv      = "environment" // HF_HUB_CACHE or HF_HOME, or their default
	cacheFromSettings = "settings"    // chosen in the app
)

// downloadManager runs at most one download of the pinned artifact for the
// UI's Model page: it plans (file list, preflight) on request, runs,
// pauses, resumes and cancels the job, and publishes its events on the
// websocket as {"type":"download","data":<download.Event>}. The cache
// folder is the Hugging Face cache unless another one was chosen. Close
// stops it.
type downloadManager struct {
	repo, revision string
	publish        func(server.Event)
	ctx            context.Context
	cancel         context.CancelFunc
	wg             sync.WaitGroup

	mu          sync.Mutex
	cacheDir    string
	cacheSource string
	job         *download.Job
	plan        *download.Plan
	planning    bool
	planErr     string
	running     bool
	runErr      string
	last        *download.Event
	// seq counts the events published: a status carries the count it
	// saw, so the UI can tell a status read before an event it already
	// applied (a poll or an action's answer overtaken by the websocket)
	// from a newer one.
	seq uint64
}

func newDownloadManager(publish func(server.Event)) *downloadManager {
	ctx, cancel := context.WithCancel(context.Background())
	d := &downloadManager{repo: download.DefaultRepo, revision: download.DefaultRevision, publish: publish, ctx: ctx, cancel: cancel, cacheSource: cacheFromEnv}
	if env, err := hub.EnvFromOS(); err == nil {
		d.cacheDir = env.CacheDir
	}
	return d
}

// Close cancels a running download (its progress stays on disk) and waits.
func (d *downloadManager) Close() {
	d.cancel()
	d.wg.Wait()
}

// downloadStatus is GET /ui/download.
type downloadStatus struct {
	Repo        string          `json:"repo"`
	Revision    string          `json:"revision"`
	CacheDir    string          `json:"cache_dir"`
	CacheSource string          `json:"cache_source"`
	Disk        map[string]any  `json:"disk"`
	Planning    bool            `json:"planning"`
	Plan        *download.Plan  `json:"plan,omitempty"`
	PlanErr     string          `json:"plan_error,omitempty"`
	State       download.State  `json:"state"`
	Running     bool            `json:"running"`
	Error       string          `json:"error,omitempty"`
	Last        *download.Event `json:"last,omitempty"`
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
		Repo: d.repo, Revision: d.revision, CacheDir: d.cacheDir, CacheSource: d.cacheSource, Planning: d.planning,
		Plan: d.plan, PlanErr: d.planErr, State: download.StateIdle, Running: d.running, Error: d.runErr, Last: d.last,
		Seq: d.seq,
	}
	if d.cacheDir != "" {
		st.Disk = diskFree(d.cacheDir)
	}
	if d.job != nil {
		st.State = d.job.State()
	}
	if !d.running && d.plan != nil && d.plan.Complete() {
		st.State = download.StateDone
	}
	if st.State == download.StateDone && d.plan != nil {
		st.ModelDir = d.plan.SnapshotDir
	}
	return st
}

// SetCacheDir makes dir the cache the download goes to, from source; the
// plan is dropped (free space and present files differ there). It refuses
// while a download runs.
func (d *downloadManager) SetCacheDir(dir, source string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return errors.New("pause or cancel the download before choosing another folder")
	}
	d.cacheDir, d.cacheSource = dir, source
	d.job, d.plan, d.planErr, d.runErr, d.last = nil, nil, "", "", nil
	return nil
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

// newJob builds a job for the cache folder from the environment
// (HF_ENDPOINT, HF_TOKEN, ...). Call with d.mu held.
func (d *downloadManager) newJob() (*download.Job, error) {
	env, err := hub.EnvFromOS()
	if err != nil {
		return nil, err
	}
	if env.Offline {
		return nil, errors.New("HF_HUB_OFFLINE is set: listing the files needs the hub")
	}
	if d.cacheDir == "" {
		d.cacheDir = env.CacheDir
	}
	return download.New(download.Options{
		Repo: d.repo, Revision: d.revision, CacheDir: d.cacheDir, Client: hub.NewClient(env),
		OnEvent: d.onEvent,
	})
}

// downloadEvent is a download event as the websocket publishes it: with
// its place in the sequence (downloadStatus.Seq).
type downloadEvent struct {
	download.Event
	Seq uint64 `json:"seq"`
}

func (d *downloadManager) onEvent(ev download.Event) {
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
		var p *download.Plan
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
