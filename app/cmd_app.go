package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/server"
	"github.com/spoolhq/spool/frontend"
)

type appFlags struct {
	model    string
	noWindow bool
	bind     string
	port     int
	apiKey   string
	memory   string
	context  int
	// promptCache is --prompt-cache and --prompt-cache-max.
	promptCache promptCacheFlags
	gpu         gpuFlag
	remote      remoteFlags
}

func newAppCmd() *cobra.Command {
	var f appFlags
	cmd := &cobra.Command{
		Use:   "app",
		Short: "Open Spool: the menu-bar app and its window, or with --no-window the engine and the web UI",
		Long: `App starts the engine in this process and serves the API and the web UI on
the local listener (http://127.0.0.1:8484/ by default). Where a desktop is
available (macOS, or Linux with a display and a build with the desktop
shell) it also puts Spool in the menu bar and opens its window; otherwise,
or with --no-window, it runs headless until interrupted.

Settings saved from the UI (bind address, port, API key, model directory,
memory budget, context) apply at the next start; flags override them.`,
		Example: `  spool app
  spool app --no-window --model assets/models/glm52-demo --port 8484`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runApp(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model directory (default: the saved setting, $SPOOL_MODEL or the demo model)")
	fl.BoolVar(&f.noWindow, "no-window", false, "no menu bar and no window: serve the engine and the web UI only")
	fl.StringVar(&f.bind, "host", "", "address to listen on (default: the saved setting or 127.0.0.1)")
	fl.IntVar(&f.port, "port", 0, "port to listen on (default: the saved setting or 8484)")
	fl.StringVar(&f.apiKey, "api-key", "", "require this API key (default: the saved setting or $SPOOL_API_KEY; prefer those: every local user can read a flag in the process list)")
	fl.StringVar(&f.memory, "memory", "", "memory budget, e.g. 24GiB (default: the saved setting or the machine's memory)")
	fl.IntVar(&f.context, "context", 0, "context length per sequence in tokens (default: the saved setting or 4096)")
	f.promptCache.register(fl)
	f.gpu.register(fl)
	f.remote.register(fl)
	return cmd
}

// appRuntime is what `spool app` runs: the supervisor, the UI's API and
// the download manager, built from the saved settings and the flags.
type appRuntime struct {
	engine    *supervisor
	downloads *downloadManager
	settings  *settingsStore // the settings file, its one owner in this process
	built     bool           // the UI was built in (not the placeholder)
	stderr    io.Writer      // where setting problems are reported
	// restarting is set while restart stops and starts the engine.
	restarting atomic.Bool

	mu    sync.Mutex
	flags appFlags
	ctx   context.Context // the app's run, for restarts the UI asks for
}

func newAppRuntime(f *appFlags, stderr io.Writer) (*appRuntime, error) {
	rt := &appRuntime{flags: *f, settings: newSettingsStore(settingsPath()), stderr: stderr}
	cfg, err := rt.config()
	if err != nil {
		return nil, err
	}
	assets, built := frontend.Assets()
	rt.built = built
	rt.downloads = newDownloadManager(rt.publish)
	ui := newUIAPI(cfg.ModelDir, rt.settings, rt.downloads)
	ui.load = rt.loadModel
	rt.engine = newSupervisor(cfg, assets, ui, nil)
	return rt, nil
}

// publish sends an event to the UI's websocket clients, while the engine
// serves.
func (rt *appRuntime) publish(ev server.Event) {
	if rt.engine != nil {
		rt.engine.publish(ev)
	}
}

// loadModel makes dir the model directory (saved, and over --model for
// this run) and restarts the engine on it in the background.
func (rt *appRuntime) loadModel(dir string) error {
	rt.mu.Lock()
	was := rt.flags.model
	rt.flags.model = dir
	ctx := rt.ctx
	rt.mu.Unlock()
	// The engine being served stops only for a model that opens and fits.
	if err := rt.checkModel(); err != nil {
		rt.mu.Lock()
		rt.flags.model = was
		rt.mu.Unlock()
		return fmt.Errorf("cannot serve %s: %w", dir, err)
	}
	if _, _, err := rt.settings.Update("", func(s *appSettings) error { s.ModelDir = dir; return nil }); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// The request that asked is answered before the server stops.
	go func() {
		if err := rt.restart(ctx); err != nil {
			fmt.Fprintf(rt.stderr, "spool: loading %s: %v\n", dir, err)
		}
	}()
	return nil
}

// checkModel opens the headers of the configured model and plans it, as
// a start would, without loading anything.
func (rt *appRuntime) checkModel() error {
	cfg, err := rt.config()
	if err != nil {
		return err
	}
	// The CPU's plan: a start falls back to it when the GPU's lines do
	// not fit.
	c := cfg.Config
	c.GPU = host.GPUOff
	_, err = host.PreviewOpen(c)
	return err
}

// config reads the saved settings and applies the flags over them.
func (rt *appRuntime) config() (supervisorConfig, error) {
	rt.mu.Lock()
	flags := rt.flags
	rt.mu.Unlock()
	f := &flags
	gpuMode, err := f.gpu.check()
	if err != nil {
		return supervisorConfig{}, err
	}
	s, _, err := rt.settings.Load()
	if err != nil {
		fmt.Fprintf(rt.stderr, "spool: ignoring the saved settings: %v\n", err)
		s = appSettings{}
	}
	s = s.withDefaults()
	if f.model != "" {
		s.ModelDir = f.model
	}
	rcfg, err := f.remote.over(s)
	if err != nil {
		return supervisorConfig{}, err
	}
	dir, err := host.ResolveModelDir(s.ModelDir)
	if err != nil && rcfg.URL == "" {
		return supervisorConfig{}, err
	}
	if f.bind != "" {
		s.Host = f.bind
	}
	if f.port != 0 {
		s.Port = f.port
	}
	if f.apiKey != "" {
		s.APIKey = f.apiKey
	}
	if f.memory != "" {
		s.Memory = f.memory
	}
	if f.context != 0 {
		s.Context = f.context
	}
	pc, err := f.promptCache.resolve()
	if err != nil {
		return supervisorConfig{}, err
	}
	log := newLogger(rt.stderr, slog.LevelInfo)
	pc.Logger = log
	return supervisorConfig{
		Remote: rcfg,
		Server: server.Config{Host: s.Host, Port: s.Port, APIKey: s.APIKey, ModelID: modelIDFor(dir), Logger: log},
		Config: host.Config{
			ModelDir:    dir,
			Memory:      host.Memory{Budget: s.Memory, KVCache: s.KVCache},
			Context:     s.Context,
			MaxBatch:    appSequences,
			UsageDir:    usageDir(),
			PromptCache: pc,
			GPU:         gpuMode,
		},
	}, nil
}

// appSequences is the sequences the app's engine decodes together: a
// desktop app serves one person and the agents they run, and fewer
// sequences than spool serve's (scheduler.DefaultMaxBatch) leave the
// memory plan more room for the expert cache.
const appSequences = 4

// restart applies the saved settings and starts the engine (stopping it
// first when it runs).
func (rt *appRuntime) restart(ctx context.Context) error {
	cfg, err := rt.config()
	if err != nil {
		return err
	}
	rt.restarting.Store(true)
	defer rt.restarting.Store(false)
	rt.engine.Stop()
	rt.engine.SetConfig(cfg)
	rt.engine.Start(ctx)
	return nil
}

func runApp(cmd *cobra.Command, f *appFlags) error {
	stderr := cmd.ErrOrStderr()
	warnSecretFlags(cmd, stderr)
	rt, err := newAppRuntime(f, stderr)
	if err != nil {
		return err
	}
	defer rt.downloads.Close()
	if !rt.built {
		fmt.Fprintln(stderr, "spool: this binary was built without the web UI (build with `make app`); serving a placeholder page")
	}
	rt.mu.Lock()
	rt.ctx = cmd.Context()
	rt.mu.Unlock()
	if !f.noWindow && desktopAvailable() {
		return runDesktop(cmd.Context(), rt)
	}
	return serveHeadless(cmd.Context(), rt.engine, stderr, rt.restarting.Load)
}

// runHeadless serves until ctx ends or the engine fails.
func runHeadless(ctx context.Context, h *supervisor, stderr io.Writer) error {
	return serveHeadless(ctx, h, stderr, nil)
}

// serveHeadless is runHeadless where a stop during a restart (restarting
// reports one) is not the end.
func serveHeadless(ctx context.Context, h *supervisor, stderr io.Writer, restarting func() bool) error {
	changes := make(chan engineStatus, 16)
	h.onChange = func(st engineStatus) {
		select {
		case changes <- st:
		default:
		}
	}
	h.Start(ctx)
	defer h.Stop()
	for {
		select {
		case <-ctx.Done():
			if h.Running() {
				fmt.Fprintf(stderr, "spool: stopping: the requests in flight have %s to finish (a second Ctrl-C quits at once)\n", h.ShutdownGrace())
			}
			return nil
		case st := <-changes:
			switch st.State {
			case engineLoading:
				fmt.Fprintf(stderr, "spool: %s\n", st.Detail)
			case engineReady:
				what := st.Model
				if st.Remote != "" {
					what = "the remote engine at " + st.Remote
				}
				fmt.Fprintf(stderr, "spool: serving %s on %s (web UI at %s/)\n", what, st.URL, st.URL)
				if st.Detail != "" {
					fmt.Fprintf(stderr, "spool: %s\n", st.Detail)
				}
			case engineFailed:
				return errors.New(st.Detail)
			case engineStopped:
				// A restart stops the engine and starts it again.
				if (restarting != nil && restarting()) || h.Running() {
					continue
				}
				if ctx.Err() == nil {
					return errors.New("the engine stopped")
				}
				return nil
			}
		}
	}
}

// defaultRun is what `spool` with no command does (the root command's
// RunE): launched as Spool.app, or from a desktop launcher with no
// terminal, it opens the app; from a terminal it prints the help.
func defaultRun(cmd *cobra.Command, _ []string) error {
	if launchedAsApp() {
		return runApp(cmd, &appFlags{})
	}
	return cmd.Help()
}

// modelIDFor is the id the API serves dir under: its name, or a hub
// repository's (server.ModelIDFromDir).
func modelIDFor(dir string) string { return server.ModelIDFromDir(dir) }

func launchedAsApp() bool {
	if exe, err := os.Executable(); err == nil && strings.Contains(exe, ".app/Contents/MacOS/") {
		return true
	}
	return desktopAvailable() && !term.IsTerminal(int(os.Stdin.Fd()))
}
