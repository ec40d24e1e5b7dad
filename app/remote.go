package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/server"
	"github.com/spoolhq/spool/engine/status"
)

// The remote engine: instead of loading the model, Spool forwards its API
// to an OpenAI-compatible server (vLLM, SGLang, another Spool), set by
// `spool serve --remote URL` and `spool app --remote URL`, or saved in the
// settings ("Engine: a server").

// Engine kinds in the settings.
const (
	engineLocal  = "local"
	engineRemote = "remote"
)

// remoteFlags are the --remote flags of serve and app.
type remoteFlags struct {
	url     string
	key     string
	timeout time.Duration
}

func (f *remoteFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.url, "remote", "", "forward to this OpenAI-compatible server (vLLM, SGLang, another Spool) instead of running the model here, e.g. http://gpu-box:8000")
	fl.StringVar(&f.key, "remote-key", "", "the remote server's API key, sent to it and nowhere else (default $SPOOL_REMOTE_KEY; prefer it: every local user can read a flag in the process list)")
	fl.DurationVar(&f.timeout, "remote-timeout", remote.DefaultTimeout, "longest wait for the remote's answer to begin, and longest silence within a stream")
}

// config is the remote engine the flags name (no URL: none); the key
// defaults to $SPOOL_REMOTE_KEY. It checks the URL.
func (f *remoteFlags) config() (remote.Config, error) {
	if f.url == "" {
		if f.key != "" {
			return remote.Config{}, errors.New("--remote-key needs --remote URL")
		}
		return remote.Config{}, nil
	}
	cfg := remote.Config{URL: f.url, Key: f.key, Timeout: f.timeout}
	if cfg.Key == "" {
		cfg.Key = os.Getenv("SPOOL_REMOTE_KEY")
	}
	if _, err := remote.New(cfg); err != nil {
		return remote.Config{}, err
	}
	return cfg, nil
}

// over is the remote engine of the flags over the saved settings s:
// --remote replaces the saved server, --remote-key and --remote-timeout
// apply to either.
func (f *remoteFlags) over(s appSettings) (remote.Config, error) {
	if f.url != "" {
		return f.config()
	}
	cfg := s.remoteConfig()
	if f.key != "" {
		if cfg.URL == "" {
			return remote.Config{}, errors.New("--remote-key needs --remote URL (or a server saved in the settings)")
		}
		cfg.Key = f.key
	}
	if cfg.URL != "" {
		cfg.Timeout = f.timeout
	}
	return cfg, nil
}

// checkEngine validates the engine settings.
func (s appSettings) checkEngine() error {
	switch s.Engine {
	case "", engineLocal, engineRemote:
	default:
		return fmt.Errorf("settings: engine %q must be %q (this Mac) or %q (a server)", s.Engine, engineLocal, engineRemote)
	}
	if s.Engine == engineRemote && s.RemoteURL == "" {
		return errors.New("settings: the engine is a server, but no server URL is set")
	}
	if s.RemoteURL != "" {
		if _, err := remote.ParseURL(s.RemoteURL); err != nil {
			return fmt.Errorf("settings: %w", err)
		}
	}
	if strings.ContainsAny(s.RemoteKey, "\r\n") {
		return errors.New("settings: the server key may not hold a line break")
	}
	return nil
}

// remoteConfig is the remote engine of the settings, or none when the
// engine is this Mac.
func (s appSettings) remoteConfig() remote.Config {
	if s.Engine != engineRemote {
		return remote.Config{}
	}
	return remote.Config{URL: s.RemoteURL, Key: s.RemoteKey}
}

// forBrowser is the settings as the UI may see them: the remote key is
// left out (the answers' remote_key_set says whether one is saved).
func (s appSettings) forBrowser() appSettings {
	s.RemoteKey = ""
	return s
}

// withEngineOf keeps the engine settings of saved: PUT /ui/settings edits
// the others, /ui/engine these.
func (s appSettings) withEngineOf(saved appSettings) appSettings {
	s.Engine, s.RemoteURL, s.RemoteKey = saved.Engine, saved.RemoteURL, saved.RemoteKey
	return s
}

// runRemote serves the API and the UI forwarding to the remote engine of
// cfg; no model is loaded. The remote may be down at the start: Spool
// serves anyway, says so, and its status follows the remote's probes.
func (h *supervisor) runRemote(ctx context.Context, cfg supervisorConfig) error {
	rc, err := remote.New(cfg.Remote)
	if err != nil {
		return err
	}
	h.set(engineStatus{State: engineLoading, Detail: "connecting to the remote engine at " + rc.Endpoint(), Progress: 0.5, Remote: rc.Endpoint()})
	scfg := cfg.Server
	scfg.Status = h.board
	srv, err := server.NewRemote(scfg, rc)
	if err != nil {
		return err
	}
	return h.serve(ctx, srv, nil, rc.Run, func(ctx context.Context, url string) engineStatus {
		st := engineStatus{State: engineReady, Progress: 1, URL: url, Remote: rc.Endpoint()}
		if first := rc.Probe(ctx); !first.Reachable {
			st.Detail = "the remote engine does not answer yet: " + first.Error
		}
		return st
	})
}

// remoteStatus is the remote engine's state while the supervisor forwards to
// one.
func (h *supervisor) remoteStatus() (remote.Status, bool) {
	h.mu.Lock()
	srv := h.srv
	h.mu.Unlock()
	if srv == nil {
		return remote.Status{}, false
	}
	return srv.RemoteStatus()
}

// engineMenuView is what the menu bar's engine item shows.
type engineMenuView struct {
	Title       string // the item: which engine, and how the server is doing
	Local       bool   // "This Mac" is checked
	Server      bool   // "A server" is checked
	ServerTitle string
	// ServerSet: a server is saved; choosing "A server" without one opens
	// the Settings page instead.
	ServerSet bool
}

// engineMenu computes the engine item from the saved settings and the
// running engine (rs: the remote's state while forwarding to one).
func engineMenu(s appSettings, running engineStatus, rs *remote.Status) engineMenuView {
	v := engineMenuView{Title: "Engine: this Mac", Local: true, ServerTitle: "A server… (set one in Settings)"}
	if s.RemoteURL != "" {
		v.ServerSet = true
		v.ServerTitle = "A server (" + hostOf(s.RemoteURL) + ")"
	}
	if s.Engine == engineRemote {
		v.Local, v.Server = false, true
	}
	if running.Remote == "" {
		if v.Server {
			v.Title = "Engine: a server (applies at the next start)"
		}
		return v
	}
	v.Title = "Engine: " + hostOf(running.Remote)
	switch {
	case rs == nil || rs.CheckedAt == nil:
		v.Title += " · connecting"
	case !rs.Reachable:
		v.Title += " · not reachable"
	default:
		v.Title += fmt.Sprintf(" · %.0f ms", rs.LatencyMS)
		if rs.Last != nil && rs.Last.Rate() > 0 {
			v.Title += fmt.Sprintf(" · %.1f tok/s", rs.Last.Rate())
		}
	}
	return v
}

// hostOf is a URL's host[:port], for short labels.
func hostOf(raw string) string {
	if u, err := remote.ParseURL(raw); err == nil {
		return u.Host
	}
	return raw
}

// remoteStatusLine is the menu bar's first line while Spool forwards to a
// server: which one, whether it answers, and the last reply's rate from
// its usage.
func remoteStatusLine(srv *status.Status) string {
	where := "Server " + hostOf(srv.Remote.Endpoint)
	switch {
	case !srv.Remote.Reachable:
		return where + " not reachable"
	case srv.State == status.Generating:
		return where + " · generating"
	}
	line := where + " · " + srv.Model
	if srv.Last != nil && srv.Last.DecodeTokensPerSecond > 0 {
		line += " · last reply " + formatRate(srv.Last.DecodeTokensPerSecond) + " tok/s"
	}
	return line
}
