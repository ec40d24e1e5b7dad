//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/spoolhq/spool/internal/testfifo"
)

// settingsUI is the UI API on a fresh settings file, for the settings tests.
func settingsUI(t *testing.T) (*uiAPI, string) {
	t.Helper()
	dm := newDownloadManager(nil)
	t.Cleanup(dm.Close)
	path := filepath.Join(t.TempDir(), "settings.json")
	return newUIAPI(t.TempDir(), newSettingsStore(path), dm), path
}

// serve runs one request and returns its status and body, from any goroutine.
func serve(h http.Handler, method, path, body string, header ...string) (int, map[string]any, error) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		return w.Code, nil, fmt.Errorf("%s %s: %d, not JSON: %s", method, path, w.Code, w.Body)
	}
	return w.Code, out, nil
}

// A FIFO at the settings path is refused, not read: it hung app and serve.
func TestSettingsFIFORefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	testfifo.Refused(t, path, func() error {
		_, err := loadSettings(path)
		return err
	})
	// The UI API starts, and answers with an error naming the file.
	dm := newDownloadManager(nil)
	defer dm.Close()
	u := newUIAPI(t.TempDir(), newSettingsStore(path), dm)
	code, v, err := serve(u, "GET", "/ui/settings", "")
	if err != nil || code != 500 || !strings.Contains(fmt.Sprint(v), path) || !strings.Contains(fmt.Sprint(v), "settings_file_unusable") {
		t.Fatalf("GET /ui/settings on a FIFO: %d %v %v", code, v, err)
	}
}

// A huge settings file is refused by its size, without reading it: a
// 768 MiB one cost 1.6 GB at start and more on every GET.
func TestSettingsHugeFileRefusedUnread(t *testing.T) {
	u, path := settingsUI(t)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(768 << 20); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 3 {
		code, v, err := serve(u, "GET", "/ui/settings", "")
		if err != nil || code != 500 || !strings.Contains(fmt.Sprint(v), "more than") || !strings.Contains(fmt.Sprint(v), path) {
			t.Fatalf("GET /ui/settings on a 768 MiB file: %d %v %v", code, v, err)
		}
		if code, _, _ := serve(u, "GET", "/ui/engine", ""); code != 500 {
			t.Fatalf("GET /ui/engine on a 768 MiB file: %d", code)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > settingsMaxBytes {
		t.Errorf("six requests on a 768 MiB settings file allocated %d bytes, want under %d (the file must not be read)", grew, settingsMaxBytes)
	}
}

// A settings file that cannot be used is named, never overwritten by a
// save, and the Settings page can set it aside.
func TestSettingsResetCorruptFile(t *testing.T) {
	u, path := settingsUI(t)
	corrupt := []byte(`{"port": 80`)
	if err := os.WriteFile(path, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/ui/settings", ""},
		{"PUT", "/ui/settings", `{"port":9000}`},
		{"GET", "/ui/engine", ""},
		{"PUT", "/ui/engine", `{"engine":"local"}`},
	} {
		code, v, err := serve(u, r.method, r.path, r.body)
		e, _ := v["error"].(map[string]any)
		if err != nil || code != 500 || e["code"] != "settings_file_unusable" || !strings.Contains(fmt.Sprint(e["message"]), path) {
			t.Errorf("%s %s on a corrupt file: %d %v %v", r.method, r.path, code, v, err)
		}
	}
	if data, _ := os.ReadFile(path); string(data) != string(corrupt) {
		t.Fatalf("the corrupt file was overwritten: %q", data)
	}
	code, v, err := serve(u, "POST", "/ui/settings/reset", "")
	aside, _ := v["set_aside"].(string)
	if err != nil || code != 200 || aside == "" {
		t.Fatalf("reset: %d %v %v", code, v, err)
	}
	if data, err := os.ReadFile(aside); err != nil || string(data) != string(corrupt) {
		t.Errorf("the old file was not kept at %s: %q %v", aside, data, err)
	}
	if code, v, _ := serve(u, "PUT", "/ui/settings", `{"port":9000}`); code != 200 {
		t.Fatalf("PUT after the reset: %d %v", code, v)
	}
	if s, err := loadSettings(path); err != nil || s.Port != 9000 {
		t.Fatalf("after the reset and a save: %+v %v", s, err)
	}
}

// Three simultaneous edits through three endpoints never lose one (11 of
// 40 rounds lost one when each loaded, changed and saved on its own).
func TestSettingsSimultaneousEditsKeepAll(t *testing.T) {
	u, path := settingsUI(t)
	store := u.settings
	for round := range 40 {
		port, memory := 9000+round, fmt.Sprintf("%dGiB", 8+round)
		url := fmt.Sprintf("http://gpu-%d:8000/v1", round)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		start := make(chan struct{})
		edit := func(f func() error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs <- f()
			}()
		}
		put := func(method, p, body string) func() error {
			return func() error {
				if code, v, err := serve(u, method, p, body); err != nil || code != 200 {
					return fmt.Errorf("%s %s %s: %d %v %v", method, p, body, code, v, err)
				}
				return nil
			}
		}
		edit(put("PUT", "/ui/settings", fmt.Sprintf(`{"port":%d}`, port)))
		edit(put("PUT", "/ui/settings", fmt.Sprintf(`{"memory":%q}`, memory)))
		edit(put("PUT", "/ui/engine", fmt.Sprintf(`{"engine":"remote","remote_url":%q,"remote_key":"k%d"}`, url, round)))
		// The menu bar's engine choice, as chooseEngine makes it.
		edit(func() error {
			_, _, err := store.Update("", func(s *appSettings) error { s.Context = 1024 * (round + 1); return nil })
			return err
		})
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		s, err := loadSettings(path)
		if err != nil {
			t.Fatal(err)
		}
		want := appSettings{Port: port, Memory: memory, Context: 1024 * (round + 1), Engine: engineRemote, RemoteURL: url, RemoteKey: fmt.Sprintf("k%d", round)}
		if s != want {
			t.Fatalf("round %d lost an edit: saved %+v, want %+v", round, s, want)
		}
	}
}

// A page that edits what it read saves with If-Match: of two pages that
// read one version, the second save is refused, not applied over the
// first's.
func TestSettingsCompareAndSwap(t *testing.T) {
	u, path := settingsUI(t)
	code, v, err := serve(u, "GET", "/ui/settings", "")
	version, _ := v["version"].(string)
	if err != nil || code != 200 {
		t.Fatalf("GET: %d %v %v", code, v, err)
	}
	if code, v, _ := serve(u, "PUT", "/ui/settings", `{"port":9001}`, "If-Match", `"`+version+`"`); code != 200 {
		t.Fatalf("first save: %d %v", code, v)
	}
	code, v, _ = serve(u, "PUT", "/ui/settings", `{"port":9002,"hub_cache":"/x"}`, "If-Match", `"`+version+`"`)
	if e, _ := v["error"].(map[string]any); code != 412 || e["code"] != "settings_changed" {
		t.Fatalf("a save against an old version: %d %v", code, v)
	}
	if s, _ := loadSettings(path); s.Port != 9001 || s.HubCache != "" {
		t.Fatalf("saved %+v", s)
	}
	_, v, _ = serve(u, "GET", "/ui/settings", "")
	if code, v, _ := serve(u, "PUT", "/ui/settings", `{"port":9003}`, "If-Match", `"`+v["version"].(string)+`"`); code != 200 || v["version"] == version {
		t.Fatalf("a save against the current version: %d %v", code, v)
	}
}

// The settings file is replaced whole, readable by its owner only, and no
// temporary file is left beside it.
func TestSettingsSavedAtomically(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	store := newSettingsStore(path)
	for i := range 5 {
		if _, _, err := store.Update("", func(s *appSettings) error { s.APIKey = fmt.Sprint("key-", i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("beside the settings: %v", entries)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("settings file: %v %v", fi.Mode(), err)
	}
}
