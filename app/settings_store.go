package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spoolhq/spool/internal/atomicfile"
	"github.com/spoolhq/spool/internal/notify"
)

// settingsStore is the one owner of the settings file in a process: the
// Settings page, the engine choice, the download folder, a model loaded
// from the UI and the menu bar all read and change it here. Changes are
// field-level read-modify-writes under one lock (each re-reads the file,
// so none saves a stale copy over another's edit), and a caller that
// edited what it read earlier passes that version to be refused, not
// applied, when the file has changed since (compare-and-swap).
//
// Writers in this process are the only ones: subscribers (the menu bar)
// hear of every change (Changes) instead of re-reading the file.
type settingsStore struct {
	path    string
	changes notify.Notifier
	mu      sync.Mutex
}

func newSettingsStore(path string) *settingsStore {
	atomicfile.Sweep(path) // the leftovers of saves a kill cut short
	return &settingsStore{path: path}
}

// errSettingsChanged is a compare-and-swap that lost: the file is not
// the version the change was made against.
var errSettingsChanged = errors.New("the settings were changed elsewhere since they were read")

// errSettingsUnchanged, from a change, leaves the file as it is.
var errSettingsUnchanged = errors.New("the settings are unchanged")

// Path is the settings file.
func (st *settingsStore) Path() string { return st.path }

// Changes subscribes to the saved settings: the channel is signalled after
// each change saved or reset; stop ends the subscription.
func (st *settingsStore) Changes() (changed <-chan struct{}, stop func()) {
	return st.changes.Subscribe()
}

// Load reads the settings and their version.
func (st *settingsStore) Load() (appSettings, string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return readSettings(st.path)
}

// Update applies change to the saved settings and saves them when change
// and the check pass. ifVersion, when not "", must be the file's version
// (errSettingsChanged otherwise). It returns what was saved and its
// version; change returning errSettingsUnchanged saves nothing. A file that cannot be read is never overwritten (Reset sets
// it aside).
func (st *settingsStore) Update(ifVersion string, change func(*appSettings) error) (appSettings, string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, version, err := readSettings(st.path)
	if err != nil {
		return s, version, err
	}
	if ifVersion != "" && ifVersion != version {
		return s, version, errSettingsChanged
	}
	before := s
	if err := change(&s); errors.Is(err, errSettingsUnchanged) {
		return before, version, nil
	} else if err != nil {
		return before, version, err
	}
	if err := s.check(); err != nil {
		return s, version, err
	}
	version, err = writeSettings(st.path, s)
	if err == nil {
		st.changes.Notify()
	}
	return s, version, err
}

// Reset sets the settings file aside (renamed next to it, so nothing is
// lost) and the defaults apply from then on. It returns where the old
// file went ("" when there was none).
func (st *settingsStore) Reset(now time.Time) (string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, err := os.Lstat(st.path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	aside := fmt.Sprintf("%s.reset-%s", st.path, now.UTC().Format("20060102T150405.000000000Z"))
	if err := os.Rename(st.path, aside); err != nil {
		return "", fmt.Errorf("setting the settings file aside: %w", err)
	}
	st.changes.Notify()
	if err := atomicfile.SyncDir(filepath.Dir(st.path)); err != nil {
		return aside, err
	}
	return aside, nil
}
