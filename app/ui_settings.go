package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// The Settings page's endpoints (the engine choice is ui_engine.go's):
//
//	GET  /ui/settings        {"settings", "version", "path", "defaults", "remote_key_set"}; ETag: the version
//	PUT  /ui/settings        the fields the body names change, the others stay; with If-Match: a
//	                         version, 412 settings_changed when the file changed since
//	POST /ui/settings/reset  sets the file aside (renamed next to it) and the defaults apply
//
// A settings file that cannot be used (not a regular file, too large, not
// JSON, out of range) answers 500 with the code settings_file_unusable,
// naming the file; the page then offers the reset.

// settingsPatch is a PUT /ui/settings body: a nil field is left as it is.
// The engine fields are the engine choice's (PUT /ui/engine); they are
// accepted, for a page that sends back what it read, and ignored.
type settingsPatch struct {
	Host      *string `json:"host"`
	Port      *int    `json:"port"`
	APIKey    *string `json:"api_key"`
	ModelDir  *string `json:"model_dir"`
	Memory    *string `json:"memory"`
	Context   *int    `json:"context"`
	KVCache   *string `json:"kv_cache"`
	HubCache  *string `json:"hub_cache"`
	Engine    *string `json:"engine"`
	RemoteURL *string `json:"remote_url"`
	RemoteKey *string `json:"remote_key"`
}

func (p settingsPatch) apply(s *appSettings) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	set(&s.Host, p.Host)
	set(&s.ModelDir, p.ModelDir)
	set(&s.Memory, p.Memory)
	set(&s.KVCache, p.KVCache)
	set(&s.HubCache, p.HubCache)
	if p.APIKey != nil {
		s.APIKey = *p.APIKey
	}
	if p.Port != nil {
		s.Port = *p.Port
	}
	if p.Context != nil {
		s.Context = *p.Context
	}
}

// settingsAnswer is what the page is told: never the remote key.
func (u *uiAPI) settingsAnswer(w http.ResponseWriter, s appSettings, version string) {
	w.Header().Set("ETag", `"`+version+`"`)
	uiJSON(w, http.StatusOK, map[string]any{
		"settings": s.forBrowser(), "remote_key_set": s.RemoteKey != "", "version": version,
		"path": u.settings.Path(), "defaults": defaultSettings(),
	})
}

// settingsFailure answers an error of the settings store: an unusable
// file 500 (the page offers the reset), a lost compare-and-swap 412, a
// failed save 500, a refused change 400.
func (u *uiAPI) settingsFailure(w http.ResponseWriter, err error) {
	status, code := http.StatusBadRequest, "invalid_settings"
	var fe *settingsFileError
	switch {
	case errors.As(err, &fe):
		status, code = http.StatusInternalServerError, "settings_file_unusable"
	case errors.Is(err, errSettingsChanged):
		status, code = http.StatusPreconditionFailed, "settings_changed"
	case errors.Is(err, errSettingsSave):
		status, code = http.StatusInternalServerError, "settings_not_saved"
	}
	uiJSON(w, status, map[string]any{"error": map[string]string{"message": err.Error(), "code": code, "path": u.settings.Path()}})
}

func (u *uiAPI) handleGetSettings(w http.ResponseWriter, r *http.Request) {
	s, version, err := u.settings.Load()
	if err != nil {
		u.settingsFailure(w, err)
		return
	}
	u.settingsAnswer(w, s, version)
}

func (u *uiAPI) handlePutSettings(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		uiError(w, http.StatusBadRequest, "reading the settings: %v", err)
		return
	}
	var p settingsPatch
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		uiError(w, http.StatusBadRequest, "settings: %v", err)
		return
	}
	ifVersion := strings.Trim(strings.TrimSpace(r.Header.Get("If-Match")), `"`)
	s, version, err := u.settings.Update(ifVersion, func(s *appSettings) error {
		p.apply(s)
		return nil
	})
	if err != nil {
		u.settingsFailure(w, err)
		return
	}
	// The download folder applies at once (when no download runs).
	if st := u.downloads.Status(); s.HubCache != "" && s.HubCache != st.CacheDir {
		u.downloads.SetCacheDir(s.HubCache, cacheFromSettings)
	}
	u.settingsAnswer(w, s, version)
}

// handleResetSettings sets the settings file aside; the answer is the
// defaults, with where the old file went.
func (u *uiAPI) handleResetSettings(w http.ResponseWriter, r *http.Request) {
	aside, err := u.settings.Reset(time.Now())
	if err != nil {
		uiError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	uiJSON(w, http.StatusOK, map[string]any{
		"settings": appSettings{}, "remote_key_set": false, "version": settingsVersion(nil), "set_aside": aside,
		"path": u.settings.Path(), "defaults": defaultSettings(),
	})
}
