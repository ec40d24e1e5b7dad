package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/server"
)

// planTimeout bounds listing the artifact's files on the hub.
const planTimeout = 30 * time.Second

// downloadManager runs at most one download of the pinned artifact for the
// UI's Model page: it plans (file list, preflight) on request, runs,
// pauses, resumes and cancels the job, and publishes its events on the
// websocket as {"type":"download","data":<download.Event>}. Close stops it.
type downloadManager struct {
	repo, revision string
	publish        func(server.Event)
	ctx            context.Context
	cancel         context.CancelFunc
	wg             sync.WaitGroup

	mu       sync.Mutex
	cacheDir string
	job      *download.Job
	plan     *download.Plan
	planning bool
	planErr  string
	running  bool
	runErr   string
	last     *download.Event
}

func newDownloadManager(publish func(server.Event)) *downloadManager {
	ctx, cancel := context.WithCancel(context.Background())
	d := &downloadManager{repo: download.DefaultRepo, revision: download.DefaultRevision, publish: publish, ctx: ctx, cancel: cancel}
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
	Repo     string          `json:"repo"`
	Revision string          `json:"revision"`
	CacheDir string          `json:"cache_dir"`
	Disk     map[string]any  `json:"disk"`
	Planning bool            `json:"planning"`
	Plan     *download.Plan  `json:"plan,omitempty"`
	PlanErr  string          `json:"plan_error,omitempty"`
	State    download.State  `json:"state"`
	Running  bool            `json:"running"`
	Error    string          `json:"error,omitempty"`
	Last     *download.Event `json:"last,omitempty"`
}

// Status reports the plan, the state and the latest progress.
func (d *downloadManager) Status() downloadStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := downloadStatus{
		Repo: d.repo, Revision: d.revision, CacheDir: d.cacheDir, Planning: d.planning,
		Plan: d.plan, PlanErr: d.planErr, State: download.StateIdle, Running: d.running, Error: d.runErr, Last: d.last,
	}
	if d.cacheDir != "" {
		st.Disk = diskFree(d.cacheDir)
	}
	if d.job != nil {
		st.State = d.job.State()
	}
	return st
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
		job := d.job
		d.mu.Unlock()
		if job == nil {
			return errors.New("no download has started")
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

// newJob builds the job from the environment (HF_ENDPOINT, HF_TOKEN, ...).
func (d *downloadManager) newJob() (*download.Job, error) {
	env, err := hub.EnvFromOS()
	if err != nil {
		return nil, err
	}
	if env.Offline {
		return nil, errors.New("HF_HUB_OFFLINE is set: listing the files needs the hub")
	}
	return download.New(download.Options{
		Repo: d.repo, Revision: d.revision, CacheDir: env.CacheDir, Client: hub.NewClient(env),
		OnEvent: d.onEvent,
	})
}

func (d *downloadManager) onEvent(ev download.Event) {
	d.mu.Lock()
	d.last = &ev
	d.mu.Unlock()
	if d.publish != nil {
		d.publish(server.Event{Type: "download", Data: ev})
	}
}

func (d *downloadManager) startPlan() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.planning || d.running {
		return nil
	}
	if d.job == nil {
		job, err := d.newJob()
		if err != nil {
			d.planErr = err.Error()
			return nil
		}
		d.job = job
	}
	d.planning, d.planErr = true, ""
	job := d.job
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		ctx, cancel := context.WithTimeout(d.ctx, planTimeout)
		defer cancel()
		p, err := job.Plan(ctx)
		d.mu.Lock()
		defer d.mu.Unlock()
		d.planning = false
		if err != nil {
			d.planErr = err.Error()
			return
		}
		d.plan, d.cacheDir = p, p.CacheDir
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
		return errors.New("plan the download first (it checks free space)")
	case !d.plan.Preflight.OK:
		return errors.New(d.plan.Preflight.Message)
	}
	if d.job.State() == download.StateCancelled {
		// A cancelled job stays cancelled; a new one resumes its bytes.
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
		d.mu.Lock()
		defer d.mu.Unlock()
		d.running = false
		if err != nil {
			d.runErr = err.Error()
		}
	}()
	return nil
}
