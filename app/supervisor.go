package main

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/server"
	"github.com/spoolhq/spool/engine/status"
)

// Engine states, as the tray and the UI show them: the engine's
// phases (engine/status).
const (
	engineStopped    = string(status.Stopped)
	engineLoading    = string(status.Loading)
	engineReady      = string(status.Ready)
	engineGenerating = string(status.Generating)
	engineFailed     = string(status.Failed)
)

// supervisorConfig is what a supervisor runs: the engine, and the server
// in front of it.
type supervisorConfig struct {
	host.Config
	Server server.Config
	// Remote, when its URL is set, is a remote engine to forward to
	// instead of loading the model (see runRemote).
	Remote remote.Config
	// OllamaPort, when set, is a second port (Ollama's 11434) the local
	// engine's API also answers on, if it is free (see ollamaport.go).
	OllamaPort int
}

// engineStatus is where the engine stands: its status board's lifecycle,
// and while it serves the phase of its requests.
type engineStatus struct {
	// State is the engine's phase: stopped, loading, failed, or ready,
	// queued, prefilling and generating while it serves.
	State           string  `json:"state"`
	Detail          string  `json:"detail,omitempty"`  // the loading step, or the error
	Progress        float64 `json:"progress"`          // loading, 0..1
	TokensPerSecond float64 `json:"tokens_per_second"` // while generating
	URL             string  `json:"url,omitempty"`     // the API's base URL once listening
	Model           string  `json:"model,omitempty"`   // the model directory
	Remote          string  `json:"remote,omitempty"`  // the remote engine's URL when forwarding to one
}

// supervisor runs the engine in-process for the desktop shell (and for
// `spool app --no-window`): it plans memory, loads the model with the
// streamed expert tier, and serves the API, the events websocket and the
// UI on the local listener. It can be stopped and started again; Start and
// Stop are safe for concurrent use.
type supervisor struct {
	assets   fs.FS
	ui       *uiAPI
	onChange func(engineStatus)
	// board is the engine's status, one for the process: the servers of
	// every start report to it, and the tray and the shell read it.
	board *status.Board

	mu     sync.Mutex
	cfg    supervisorConfig
	cancel context.CancelFunc
	done   chan struct{}
	sched  *scheduler.Scheduler
	srv    *server.Server
}

// newSupervisor returns a stopped supervisor serving assets and ui;
// onChange, when set, is called (on the supervisor's goroutine) after
// every state change.
func newSupervisor(cfg supervisorConfig, assets fs.FS, ui *uiAPI, onChange func(engineStatus)) *supervisor {
	h := &supervisor{cfg: cfg, assets: assets, ui: ui, onChange: onChange, board: status.NewBoard(nil)}
	h.board.SetEngine(status.Engine{Phase: status.Stopped, ModelDir: cfg.ModelDir})
	ui.attach(h)
	return h
}

// SetConfig replaces the configuration used by the next Start.
func (h *supervisor) SetConfig(cfg supervisorConfig) {
	h.mu.Lock()
	h.cfg = cfg
	h.mu.Unlock()
}

// Config is the configuration the next Start uses.
func (h *supervisor) Config() supervisorConfig {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg
}

// ModelDir is the configured model directory.
func (h *supervisor) ModelDir() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg.ModelDir
}

// ShutdownGrace is how long a stop lets the requests in flight finish.
func (h *supervisor) ShutdownGrace() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if g := h.cfg.Server.ShutdownGrace; g > 0 {
		return g
	}
	return server.DefaultShutdownGrace
}

// APIKey is the configured API key.
func (h *supervisor) APIKey() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg.Server.APIKey
}

// URL is the API's base URL for the configured address (a wildcard bind
// is reached on loopback).
func (h *supervisor) URL() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return baseURL(h.cfg.Server.Host, h.cfg.Server.Port)
}

func baseURL(bind string, port int) string {
	if bind == "" || bind == "0.0.0.0" || bind == "::" {
		bind = "127.0.0.1"
	}
	if port == 0 {
		port = 8484
	}
	return "http://" + net.JoinHostPort(bind, strconv.Itoa(port))
}

// Assets is the UI the supervisor serves.
func (h *supervisor) Assets() fs.FS { return h.assets }

// Board is the engine's status board.
func (h *supervisor) Board() *status.Board { return h.board }

// Status returns the current state; while ready it reports the phase of
// the requests in flight and their decode rate.
func (h *supervisor) Status() engineStatus {
	e := h.board.Engine()
	st := engineStatus{State: string(e.Phase), Detail: e.Detail, Progress: e.Progress, URL: e.URL, Model: e.ModelDir, Remote: e.Remote}
	if e.Phase == status.Ready && h.serving() {
		s := h.board.Status()
		st.State, st.TokensPerSecond = string(s.State), s.TokensPerSecond
	}
	return st
}

// serving reports whether a server runs.
func (h *supervisor) serving() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.srv != nil
}

func (h *supervisor) set(st engineStatus) {
	h.mu.Lock()
	st.Model = h.cfg.ModelDir
	h.mu.Unlock()
	h.board.SetEngine(status.Engine{Phase: status.Phase(st.State), Detail: st.Detail, Progress: st.Progress, URL: st.URL, ModelDir: st.Model, Remote: st.Remote})
	if h.onChange != nil {
		h.onChange(st)
	}
}

// Start loads the model and serves it in the background; it does nothing
// while the engine runs or loads. ctx bounds the whole run.
func (h *supervisor) Start(ctx context.Context) {
	h.mu.Lock()
	if h.done != nil {
		h.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	h.cancel, h.done = cancel, make(chan struct{})
	cfg, done := h.cfg, h.done
	h.mu.Unlock()
	go func() {
		defer close(done)
		err := h.run(ctx, cfg)
		final := engineStatus{State: engineStopped}
		if err != nil && ctx.Err() == nil {
			final = engineStatus{State: engineFailed, Detail: err.Error()}
		}
		cancel()
		// The final state is visible before Running turns false.
		h.set(final)
		h.mu.Lock()
		h.cancel, h.done, h.sched, h.srv = nil, nil, nil, nil
		h.mu.Unlock()
		h.board.Changed() // Running is false now
	}()
}

// Stop stops serving and unloads the model, and waits for it.
func (h *supervisor) Stop() {
	h.mu.Lock()
	cancel, done := h.cancel, h.done
	h.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Running reports whether the engine is loading or serving.
func (h *supervisor) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done != nil
}

// publish sends an event to the UI's websocket clients, if serving.
func (h *supervisor) publish(ev server.Event) {
	h.mu.Lock()
	srv := h.srv
	h.mu.Unlock()
	if srv != nil {
		srv.Publish(ev)
	}
}

// run plans, loads and serves until ctx ends or serving fails.
func (h *supervisor) run(ctx context.Context, cfg supervisorConfig) error {
	if cfg.Remote.URL != "" {
		return h.runRemote(ctx, cfg)
	}
	h.set(engineStatus{State: engineLoading, Detail: "planning memory", Progress: 0.05})
	if err := server.CheckBind(cfg.Server.Host, cfg.Server.APIKey); err != nil {
		return err
	}
	hc := cfg.Config
	hc.WatchPressure = true
	e, err := host.Open(ctx, hc, func(detail string, progress float64) {
		h.set(engineStatus{State: engineLoading, Detail: detail, Progress: progress})
	})
	if err != nil {
		return err
	}
	defer e.Close()

	h.set(engineStatus{State: engineLoading, Detail: "starting the server", Progress: 0.9})
	eng, err := e.Serving()
	if err != nil {
		return err
	}
	scfg := cfg.Server
	if scfg.ModelID == "" {
		scfg.ModelID = server.ModelIDFromDir(cfg.ModelDir)
	}
	scfg.Status = h.board
	srv, err := server.New(scfg, eng)
	if err != nil {
		return err
	}
	sched := e.Scheduler
	return h.serve(ctx, srv, sched, func(ctx context.Context) { sched.Run(ctx) }, func(_ context.Context, url string) engineStatus {
		return engineStatus{State: engineReady, Progress: 1, URL: url}
	})
}

// serve runs srv, with the UI, until ctx ends or serving fails. Beside it
// runs background (the scheduler, or the remote's probes), which is waited
// for; ready says the status to show once the server listens at url.
// sched is nil when the supervisor forwards to a remote engine.
func (h *supervisor) serve(ctx context.Context, srv *server.Server, sched *scheduler.Scheduler, background func(context.Context), ready func(ctx context.Context, url string) engineStatus) error {
	srv.WithUI(server.UI{Assets: h.assets, API: h.ui})
	ln, err := srv.Listen()
	if err != nil {
		return err
	}
	if sched != nil {
		ln = h.withOllamaPort(ln, os.Stderr)
	}
	h.mu.Lock()
	h.sched, h.srv = sched, srv
	h.mu.Unlock()

	// The engine outlives ctx until the server has stopped: a stopping
	// server lets the generations in flight finish (or ends them with an
	// error a client can act on), which needs the scheduler running.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	st := ready(runCtx, "http://"+ln.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		background(runCtx)
	}()
	h.set(st)
	err = srv.Serve(ctx, ln)
	stop()
	<-done
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}
