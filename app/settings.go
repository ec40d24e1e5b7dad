package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/server"
	"github.com/spoolhq/spool/internal/atomicfile"
	"github.com/spoolhq/spool/internal/regularfile"
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
	// KVCache is the KV cache's type: "f32" (exact; "" is it) or "bf16"
	// (half the memory: longer contexts, each cached value rounded).
	KVCache string `json:"kv_cache,omitempty"`
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
	if _, err := host.ParseKVCache(s.KVCache); err != nil {
		return fmt.Errorf("settings: kv cache: %w", err)
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

// settingsMaxBytes bounds the settings file: the Settings page writes a
// few hundred bytes (its PUT body is limited to 64 KiB), so anything
// larger is not a settings file and is refused before it is read.
const settingsMaxBytes = 1 << 20

// loadSettings reads path; a missing file gives zero settings. Anything
// but a regular file of at most settingsMaxBytes is refused without
// reading it (a FIFO would block, a huge file would cost its size).
func loadSettings(path string) (appSettings, error) {
	s, _, err := readSettings(path)
	return s, err
}

// readSettings is loadSettings with the version of the file read: a
// digest of its bytes (of none for a missing file).
func readSettings(path string) (appSettings, string, error) {
	data, err := regularfile.Read(path, settingsMaxBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return appSettings{}, settingsVersion(nil), nil
	}
	if err != nil {
		return appSettings{}, "", &settingsFileError{path: path, err: err}
	}
	s, err := parseSettings(data)
	if err != nil {
		return s, "", &settingsFileError{path: path, err: err}
	}
	return s, settingsVersion(data), nil
}

// settingsVersion names one content of the settings file.
func settingsVersion(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// settingsFileError is a settings file that cannot be used as it is (not
// a regular file, too large, not JSON, out of range); the Settings page
// offers to set it aside.
type settingsFileError struct {
	path string
	err  error
}

func (e *settingsFileError) Error() string {
	return fmt.Sprintf("the settings file %s cannot be used: %v", e.path, e.err)
}

func (e *settingsFileError) Unwrap() error { return e.err }

// errSettingsSave is a settings file that could not be written.
var errSettingsSave = errors.New("the settings were not saved")

// saveSettings writes path atomically and fsynced (file and directory),
// readable by the user only (it may hold the API keys). It returns the
// version written.
func saveSettings(path string, s appSettings) error {
	_, err := writeSettings(path, s)
	return err
}

func writeSettings(path string, s appSettings) (string, error) {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", err
	}
	data = append(data, '\n')
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("%w: %w", errSettingsSave, err)
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("%w: %w", errSettingsSave, err)
	}
	return settingsVersion(data), nil
}
