package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/server"
)

// demoModel is the committed demo model, relative to this package.
func demoModel(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "assets", "models", "glm52-demo"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatalf("the committed demo model is missing: %v", err)
	}
	return dir
}

func TestParseSettings(t *testing.T) {
	model := demoModel(t)
	tests := []struct {
		name, doc, want string
	}{
		{"empty", `{}`, ""},
		{"full", `{"host":"127.0.0.1","port":9000,"api_key":"k","model_dir":` + jsonString(model) + `,"memory":"24GiB","context":8192}`, ""},
		{"public bind with key", `{"host":"0.0.0.0","api_key":"k"}`, ""},
		{"public bind without key", `{"host":"0.0.0.0"}`, "API key"},
		{"unknown field", `{"prot":1}`, "unknown field"},
		{"bad port", `{"port":70000}`, "port"},
		{"bad memory", `{"memory":"lots"}`, "memory"},
		{"negative context", `{"context":-1}`, "context"},
		{"no model", `{"model_dir":"/nonexistent/model"}`, "config.json"},
		{"not json", `{`, "settings"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSettings([]byte(tc.doc))
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func FuzzParseSettings(f *testing.F) {
	f.Add([]byte(`{"host":"127.0.0.1","port":8484}`))
	f.Add([]byte(`{"memory":"24GiB","context":4096}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseSettings(data)
		if err != nil {
			return
		}
		if s.Port < 0 || s.Port > 65535 || s.Context < 0 {
			t.Fatalf("accepted out-of-range settings %+v", s)
		}
	})
}

func TestSettingsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "settings.json")
	s, err := loadSettings(path)
	if err != nil || s != (appSettings{}) {
		t.Fatalf("missing file: %+v, %v; want zero settings", s, err)
	}
	want := appSettings{Port: 9123, APIKey: "secret", Memory: "16GiB"}
	if err := saveSettings(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := loadSettings(path)
	if err != nil || got != want {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		t.Errorf("settings file mode %v: others may read the API key", st.Mode().Perm())
	}
	if d := want.withDefaults(); d.Host != "127.0.0.1" || d.Port != 9123 || d.Context == 0 {
		t.Errorf("withDefaults gave %+v", d)
	}
}

// uiRequest runs one request against h and decodes the JSON answer.
func uiRequest(t *testing.T, h http.Handler, method, path, body string) (int, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %s", method, path, w.Code, w.Body)
	}
	return w.Code, out
}

func TestUIAPI(t *testing.T) {
	model := demoModel(t)
	t.Setenv("HF_HUB_OFFLINE", "1")
	dm := newDownloadManager(nil)
	defer dm.Close()
	settings := filepath.Join(t.TempDir(), "settings.json")
	u := newUIAPI(model, newSettingsStore(settings), dm)

	code, info := uiRequest(t, u, "GET", "/ui/info", "")
	m, _ := info["model"].(map[string]any)
	if code != 200 || m["experts"] != 64.0 || m["mtp_layer"] != 6.0 || len(m["sparse_layers"].([]any)) != 5 {
		t.Fatalf("info: %d %v", code, info)
	}

	code, p := uiRequest(t, u, "GET", "/ui/plan?memory=16GiB&context=2048", "")
	plan, _ := p["plan"].(map[string]any)
	if code != 200 || plan["fits"] != true || plan["context"] != 2048.0 || plan["memory_bytes"] != float64(16<<30) {
		t.Fatalf("plan: %d %v", code, p)
	}
	if items, _ := plan["items"].([]any); len(items) < 7 {
		t.Errorf("plan has %d items, want the 7 line items", len(items))
	}
	for _, q := range []string{"memory=lots", "context=0", "context=999999", "sequences=x"} {
		if code, _ := uiRequest(t, u, "GET", "/ui/plan?"+q, ""); code != 400 {
			t.Errorf("plan?%s: status %d, want 400", q, code)
		}
	}

	if code, _ := uiRequest(t, u, "PUT", "/ui/settings", `{"port":9999,"memory":"8GiB"}`); code != 200 {
		t.Fatalf("put settings: %d", code)
	}
	code, s := uiRequest(t, u, "GET", "/ui/settings", "")
	if got, _ := s["settings"].(map[string]any); code != 200 || got["port"] != 9999.0 || got["memory"] != "8GiB" {
		t.Fatalf("settings: %d %v", code, s)
	}
	if code, _ := uiRequest(t, u, "PUT", "/ui/settings", `{"host":"0.0.0.0"}`); code != 400 {
		t.Errorf("a public bind without a key was saved (status %d)", code)
	}

	code, d := uiRequest(t, u, "GET", "/ui/download", "")
	if code != 200 || d["repo"] == "" || d["state"] != "idle" {
		t.Fatalf("download: %d %v", code, d)
	}
	if code, _ := uiRequest(t, u, "POST", "/ui/download/plan", ""); code != 200 {
		t.Fatalf("download plan: %d", code)
	}
	if _, d := uiRequest(t, u, "GET", "/ui/download", ""); !strings.Contains(d["plan_error"].(string), "HF_HUB_OFFLINE") {
		t.Errorf("offline plan error %v, want it to name HF_HUB_OFFLINE", d["plan_error"])
	}
	for _, a := range []string{"pause", "start", "bogus"} {
		if code, _ := uiRequest(t, u, "POST", "/ui/download/"+a, ""); code != 400 {
			t.Errorf("download/%s with no plan: status %d, want 400", a, code)
		}
	}
	if code, _ := uiRequest(t, u, "GET", "/ui/nothing", ""); code != 404 {
		t.Errorf("unknown route: status %d", code)
	}
}

func TestUIAtlas(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "assets", "atlas", "glm52-demo.experts.json"))
	if err != nil {
		t.Fatalf("the committed atlas is missing: %v", err)
	}
	dir := t.TempDir()
	u := newUIAPI(dir, newSettingsStore(filepath.Join(dir, "settings.json")), newDownloadManager(nil))
	if code, _ := uiRequest(t, u, "GET", "/ui/atlas", ""); code != 404 {
		t.Fatalf("atlas without experts.json: status %d, want 404", code)
	}
	if err := os.WriteFile(filepath.Join(dir, "experts.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, a := uiRequest(t, u, "GET", "/ui/atlas", "")
	doc, _ := a["atlas"].(map[string]any)
	if code != 200 || len(doc["categories"].([]any)) != 6 || doc["provenance"] == nil {
		t.Fatalf("atlas: %d %v", code, a)
	}
	if err := os.WriteFile(filepath.Join(dir, "experts.json"), []byte(`{"categories":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := uiRequest(t, u, "GET", "/ui/atlas", ""); code != 500 {
		t.Errorf("invalid atlas: status %d, want 500", code)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitState polls the supervisor until it reaches state (or fails the test
// when it fails or the test's deadline nears).
func waitState(t *testing.T, h *supervisor, state string) engineStatus {
	t.Helper()
	for {
		st := h.Status()
		switch {
		case st.State == state:
			return st
		case st.State == engineFailed:
			t.Fatalf("engine failed: %s", st.Detail)
		}
		if d, ok := t.Deadline(); ok && time.Until(d) < 5*time.Second {
			t.Fatalf("engine still %s, want %s", st.State, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stats(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEngineHost starts the demo model in-process, serves the UI and a
// chat request, checks the expert map moved, and stops and starts again.
func TestEngineHost(t *testing.T) {
	model := demoModel(t)
	tmp := t.TempDir()
	t.Setenv("HF_HUB_OFFLINE", "1")
	cfg := supervisorConfig{
		Config: host.Config{ModelDir: model, Context: 512, MaxBatch: 2, UsageDir: filepath.Join(tmp, "usage")},
		Server: server.Config{Host: "127.0.0.1", Port: freePort(t)},
	}
	assets := fstest.MapFS{"index.html": {Data: []byte("<!doctype html>spool ui")}}
	dm := newDownloadManager(nil)
	defer dm.Close()
	var states []string
	h := newSupervisor(cfg, assets, newUIAPI(model, newSettingsStore(filepath.Join(tmp, "settings.json")), dm), func(st engineStatus) { states = append(states, st.State) })
	ctx := context.Background()
	h.Start(ctx)
	defer h.Stop()
	st := waitState(t, h, engineReady)
	if st.URL == "" {
		t.Fatal("ready without a URL")
	}

	resp, err := http.Get(st.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(page, []byte("spool ui")) {
		t.Errorf("GET / served %q, want the UI", page)
	}

	before := stats(t, st.URL)["experts"].(map[string]any)["map"]
	body := `{"model":"spool","messages":[{"role":"user","content":"What does the function os.listdir do?"}],"max_tokens":8}`
	resp, err = http.Post(st.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: status %d", resp.StatusCode)
	}
	after := stats(t, st.URL)["experts"].(map[string]any)["map"]
	if before == after {
		t.Error("the expert map did not change after a reply")
	}

	h.Stop()
	if got := h.Status().State; got != engineStopped {
		t.Fatalf("after Stop: %s", got)
	}
	if saved, _ := filepath.Glob(filepath.Join(cfg.UsageDir, "glm52-demo-*.coli_usage")); len(saved) != 1 {
		t.Errorf("usage histories saved at stop: %v, want one for the model", saved)
	}
	h.Start(ctx)
	waitState(t, h, engineReady)
	h.Stop()
	want := []string{engineLoading, engineReady, engineStopped}
	if got := strings.Join(states, ","); !strings.Contains(got, strings.Join(want, ",")) || !strings.HasSuffix(got, engineStopped) {
		t.Errorf("state changes %s, want loading steps, ready and stopped twice", got)
	}
}

func TestEngineHostFailure(t *testing.T) {
	model := demoModel(t)
	cfg := supervisorConfig{Config: host.Config{ModelDir: model}, Server: server.Config{Host: "0.0.0.0", Port: freePort(t)}}
	dm := newDownloadManager(nil)
	defer dm.Close()
	h := newSupervisor(cfg, fstest.MapFS{}, newUIAPI(model, newSettingsStore(filepath.Join(t.TempDir(), "s.json")), dm), nil)
	h.Start(context.Background())
	defer h.Stop()
	for h.Running() {
		time.Sleep(10 * time.Millisecond)
	}
	st := h.Status()
	if st.State != engineFailed || !strings.Contains(st.Detail, "API key") {
		t.Fatalf("a public bind without a key: %+v, want failed naming the API key", st)
	}
}
