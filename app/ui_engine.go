package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/remote"
)

// The engine choice of the Settings page ("Engine: this Mac / a server"):
//
//	GET  /ui/engine        the saved choice, whether a server key is saved, and the running engine
//	PUT  /ui/engine        {"engine", "remote_url", "remote_key"} saves it with the other settings
//	POST /ui/engine/check  {"remote_url", "remote_key"} asks that server for its models
//
// The server key goes in and never comes out: answers say only whether one
// is saved. A PUT without remote_key keeps the saved key; "" clears it.

// engineChoice is a PUT /ui/engine body.
type engineChoice struct {
	Engine    string  `json:"engine"`
	RemoteURL string  `json:"remote_url"`
	RemoteKey *string `json:"remote_key"`
}

// engineView is what the UI is told.
type engineView struct {
	Engine       string `json:"engine"`
	RemoteURL    string `json:"remote_url"`
	RemoteKeySet bool   `json:"remote_key_set"`
	// Running is the engine serving now (it changes at the next start).
	Running *engineStatus `json:"running,omitempty"`
	// Remote is the remote engine's state while Spool forwards to one.
	Remote *remote.Status `json:"remote,omitempty"`
	Path   string         `json:"path"`
}

func (u *uiAPI) engineRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui/engine", u.handleGetEngine)
	mux.HandleFunc("PUT /ui/engine", u.handlePutEngine)
	mux.HandleFunc("POST /ui/engine/check", u.handleCheckEngine)
}

func (u *uiAPI) engineView(s appSettings) engineView {
	v := engineView{Engine: s.Engine, RemoteURL: s.RemoteURL, RemoteKeySet: s.RemoteKey != "", Path: u.settings.Path()}
	if v.Engine == "" {
		v.Engine = engineLocal
	}
	if u.engine != nil {
		st := u.engine.Status()
		v.Running = &st
		if rs, ok := u.engine.remoteStatus(); ok {
			v.Remote = &rs
		}
	}
	return v
}

func (u *uiAPI) handleGetEngine(w http.ResponseWriter, r *http.Request) {
	s, _, err := u.settings.Load()
	if err != nil {
		u.settingsFailure(w, err)
		return
	}
	uiJSON(w, http.StatusOK, u.engineView(s))
}

func decodeStrict(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func (u *uiAPI) handlePutEngine(w http.ResponseWriter, r *http.Request) {
	var c engineChoice
	if err := decodeStrict(r, &c); err != nil {
		uiError(w, http.StatusBadRequest, "the engine choice: %v", err)
		return
	}
	s, _, err := u.settings.Update("", func(s *appSettings) error {
		if c.RemoteURL != s.RemoteURL && c.RemoteKey == nil {
			// A saved key belongs to the server it was saved for.
			s.RemoteKey = ""
		}
		s.Engine, s.RemoteURL = c.Engine, c.RemoteURL
		if c.RemoteKey != nil {
			s.RemoteKey = *c.RemoteKey
		}
		return s.checkEngine()
	})
	if err != nil {
		u.settingsFailure(w, err)
		return
	}
	uiJSON(w, http.StatusOK, u.engineView(s))
}

// engineCheckTimeout bounds a connection test.
const engineCheckTimeout = 8 * time.Second

func (u *uiAPI) handleCheckEngine(w http.ResponseWriter, r *http.Request) {
	var c engineChoice
	if err := decodeStrict(r, &c); err != nil {
		uiError(w, http.StatusBadRequest, "the server to check: %v", err)
		return
	}
	key := ""
	if c.RemoteKey != nil {
		key = *c.RemoteKey
	} else if s, _, err := u.settings.Load(); err == nil && s.RemoteURL == c.RemoteURL {
		// Only the server the key was saved for gets it.
		key = s.RemoteKey
	}
	rc, err := remote.New(remote.Config{URL: c.RemoteURL, Key: key, Timeout: engineCheckTimeout})
	if err != nil {
		uiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), engineCheckTimeout)
	defer cancel()
	uiJSON(w, http.StatusOK, rc.Probe(ctx))
}
