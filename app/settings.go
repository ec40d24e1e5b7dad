package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/server"
)

// appSettings are what the Settings page edits and the desktop shell
// starts the engine with. Zero fields mean the default.
type appSettings struct {
	Host     string `json:"host"`      // bind address
	Port     int    `json:"port"`      // listen port
	APIKey   string `json:"api_key"`   // required when Host is not loopback
	ModelDir string `json:"model_dir"` // "" is the demo model (or $SPOOL_MODEL)
	Memory   string `json:"memory"`    // memory budget such as "24GiB"; "" is the machine's
	Context  int    `json:"context"`   // tokens per sequence
	// HubCache is where the model download goes; "" is the Hugging Face
	// cache (HF_HUB_CACHE, HF_HOME or ~/.cache/huggingface/hub).
	HubCache string `json:"hub_cache,omitempty"`
	// Engine is "local" (this Mac, the default) or "remote" (a server:
	// RemoteURL, with RemoteKey, which never reaches the browser).
	Engine    string `json:"engine,omitempty"`
	RemoteURL string `json:"remote_url,omitempty"`
	RemoteKey string `json:"remote_key,omitempty"`
}

func defaultSettings() appSettings {
	return appSettings{Host: "127.0.0.1", Port: 8484, Context: plan.DefaultContext}
}

// withDefaults fills zero fields.
func (s appSettings) withDefaults() appSettings {
	d := defaultSettings()
	if s.Host == "" {
		s.Host = d.Host
	}
	if s.Port == 0 {
		s.Port = d.Port
	}
	if s.Context == 0 {
		s.Context = d.Context
	}
	return s
}

// check validates the settings the way the engine would at start.
func (s appSettings) check() error {
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("settings: port %d is outside 1..65535", s.Port)
	}
	if s.Context < 0 {
		return fmt.Errorf("settings: context %d is negative", s.Context)
	}
	if s.Memory != "" {
		if _, err := plan.ParseSize(s.Memory); err != nil {
			return fmt.Errorf("settings: memory: %w", err)
		}
	}
	if s.ModelDir != "" {
		if _, err := os.Stat(filepath.Join(s.ModelDir, "config.json")); err != nil {
			return fmt.Errorf("settings: model directory %s has no config.json", s.ModelDir)
		}
	}
	if s.Host != "" {
		if err := server.CheckBind(s.Host, s.APIKey); err != nil {
			return fmt.Errorf("settings: %w", err)
		}
	}
	return s.checkEngine()
}

// settingsPath is $SPOOL_SETTINGS, else Spool/settings.json in the user's
// configuration directory.
func settingsPath() string {
	if p := os.Getenv("SPOOL_SETTINGS"); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "Spool", "settings.json")
}

// parseSettings decodes and checks a settings document; unknown fields
// are refused so that typos do not pass silently.
func parseSettings(data []byte) (appSettings, error) {
	var s appSettings
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("settings: %w", err)
	}
	return s, s.check()
}

// loadSettings reads path; a missing file gives zero settings.
func loadSettings(path string) (appSettings, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return appSettings{}, nil
	}
	if err != nil {
		return appSettings{}, fmt.Errorf("settings: %w", err)
	}
	s, err := parseSettings(data)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// saveSettings writes path atomically, readable by the user only (it may
// hold the API key).
func saveSettings(path string, s appSettings) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".settings-*.json")
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("settings: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	return nil
}
