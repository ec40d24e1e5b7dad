package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/download"
	"github.com/spoolhq/spool/engine/download/fakehub"
	"github.com/spoolhq/spool/engine/server"
	"github.com/spoolhq/spool/engine/status"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestGLM52Plan: the Fit page plans the pinned artifact from the built-in
// config (the fixture's) with the engine's sequence count and context.
func TestGLM52Plan(t *testing.T) {
	want, err := os.ReadFile(fixtures.Path(t, "glm52-real", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(glm52Config, want) {
		t.Fatal("app/glm52/config.json differs from ../shared/fixtures/glm52-real/config.json")
	}
	dm := newDownloadManager(nil)
	defer dm.Close()
	u := newUIAPI(demoModel(t), newSettingsStore(filepath.Join(t.TempDir(), "settings.json")), dm)
	code, p := uiRequest(t, u, "GET", "/ui/plan?model=glm52&memory=32GiB", "")
	plan, _ := p["plan"].(map[string]any)
	// The pinned revision's figures (glm52-real/README.md).
	if code != 200 || p["resident_bytes"] != 10_877_286_144.0 || p["routed_bytes"] != 372_848_459_776.0 || p["model"] != "GLM-5.2" {
		t.Fatalf("glm52 plan: %d %v", code, p)
	}
	if plan["sequences"] != float64(appSequences) || plan["context"] != 4096.0 || p["max_context"] != 1_048_576.0 || plan["experts_per_layer"] != 256.0 {
		t.Errorf("glm52 plan shape: sequences %v context %v max %v experts %v", plan["sequences"], plan["context"], p["max_context"], plan["experts_per_layer"])
	}
	if code, p := uiRequest(t, u, "GET", "/ui/plan?model=glm52&context=1048576&sequences=1&memory=512GiB", ""); code != 200 || p["plan"].(map[string]any)["context"] != 1_048_576.0 {
		t.Errorf("glm52 at its full context: %d %v", code, p)
	}
	if code, _ := uiRequest(t, u, "GET", "/ui/plan?model=other", ""); code != 400 {
		t.Errorf("an unknown model: status %d, want 400", code)
	}
	if code, p := uiRequest(t, u, "GET", "/ui/plan", ""); code != 200 || p["model"] != "glm52-demo" {
		t.Errorf("the served model's plan: %d %v", code, p["model"])
	}
}

func TestStatusLine(t *testing.T) {
	ready := engineStatus{State: engineReady, URL: "http://127.0.0.1:8484"}
	last := &status.RequestSummary{DecodeTokensPerSecond: 12.345}
	tests := []struct {
		host engineStatus
		srv  *status.Status
		want string
	}{
		{engineStatus{State: engineStopped}, nil, "Stopped"},
		{engineStatus{State: engineLoading, Progress: 0.2}, nil, "Loading… 20%"},
		{engineStatus{State: engineFailed, Detail: "no model"}, nil, "Failed: no model"},
		{ready, nil, "Ready · http://127.0.0.1:8484"},
		{ready, &status.Status{State: status.Ready, Model: "glm52-mini"}, "Ready · glm52-mini"},
		{ready, &status.Status{State: status.Ready, Model: "glm52-mini", Last: last}, "Ready · glm52-mini · last reply 12.3 tok/s"},
		{ready, &status.Status{State: status.Queued}, "Waiting for a free slot"},
		{ready, &status.Status{State: status.Prefilling, Requests: []status.RequestStatus{{Phase: status.Prefilling, PromptTokens: 400, PrefillDone: 100}}}, "Reading prompt · 25%"},
		{ready, &status.Status{State: status.Generating, TokensPerSecond: 199.4}, "Generating · 199 tok/s"},
		// A generating host whose server has just finished says ready: the
		// server's word wins over the scheduler's rate window.
		{engineStatus{State: engineGenerating, TokensPerSecond: 199}, &status.Status{State: status.Ready, Model: "m"}, "Ready · m"},
	}
	for _, tc := range tests {
		if got := statusLine(tc.host, tc.srv); got != tc.want {
			t.Errorf("statusLine(%+v, %+v) = %q, want %q", tc.host, tc.srv, got, tc.want)
		}
	}
}

func TestModelIDFor(t *testing.T) {
	for dir, want := range map[string]string{
		"assets/models/glm52-demo": "glm52-demo",
		"/hub/models--mateogrgic--GLM-5.2-colibri-int4-with-int8-mtp/snapshots/3cc8db99b1b13fc79325d987ba3c1c430766b3b8": "GLM-5.2-colibri-int4-with-int8-mtp",
		"/hub/models--mateogrgic--GLM-5.2-colibri-int4-with-int8-mtp/snapshots/3cc8db99/":                                "GLM-5.2-colibri-int4-with-int8-mtp",
		"/data/snapshots/x": "x",
	} {
		if got := modelIDFor(dir); got != want {
			t.Errorf("modelIDFor(%q) = %q, want %q", dir, got, want)
		}
	}
}

// TestDownloadFlow runs the Model page's download against a fake hub
// serving the pinned repository: plan, download, done, load; another
// folder is checked and saved.
func TestDownloadFlow(t *testing.T) {
	repo := fakehub.SampleRepo(download.DefaultRepo, 3, 200<<10, 3000)
	repo.Commit = download.DefaultRevision
	home := hubEnv(t, repo)
	var (
		mu        sync.Mutex
		published []server.Event
	)
	dm := newDownloadManager(func(ev server.Event) {
		mu.Lock()
		defer mu.Unlock()
		published = append(published, ev)
	})
	defer dm.Close()
	settings := filepath.Join(home, "settings.json")
	u := newUIAPI(demoModel(t), newSettingsStore(settings), dm)
	var loaded string
	u.load = func(dir string) error { loaded = dir; return nil }

	wait := func(what string, ok func(downloadStatus) bool) downloadStatus {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			st := dm.Status()
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %+v", what, st)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, a := range []string{"pause", "resume", "cancel", "load"} {
		if code, _ := uiRequest(t, u, "POST", "/ui/download/"+a, ""); code != 400 {
			t.Errorf("%s before a download: status %d, want 400", a, code)
		}
	}
	for _, body := range []string{`{"dir":"relative/path"}`, `{"dir":""}`, `not json`} {
		if code, _ := uiRequest(t, u, "POST", "/ui/download/folder", body); code != 400 {
			t.Errorf("folder %s: status %d, want 400", body, code)
		}
	}
	folder := filepath.Join(home, "elsewhere")
	if code, st := uiRequest(t, u, "POST", "/ui/download/folder", `{"dir":`+jsonString(folder)+`}`); code != 200 || st["cache_dir"] != folder || st["cache_source"] != cacheFromSettings {
		t.Fatalf("folder: %d %v", code, st)
	}
	if s, err := loadSettings(settings); err != nil || s.HubCache != folder {
		t.Errorf("the folder was not saved: %+v %v", s, err)
	}
	st := wait("the plan", func(s downloadStatus) bool { return s.Plan != nil })
	if !st.Plan.Preflight.OK || st.State != download.StateIdle || st.ModelDir != "" {
		t.Fatalf("planned: %+v", st)
	}
	if code, _ := uiRequest(t, u, "POST", "/ui/download/start", ""); code != 200 {
		t.Fatalf("start: %d", code)
	}
	st = wait("done", func(s downloadStatus) bool { return !s.Running && s.State == download.StateDone })
	if !strings.HasPrefix(st.ModelDir, folder) || !strings.Contains(st.ModelDir, download.DefaultRevision) {
		t.Errorf("done: model dir %q", st.ModelDir)
	}
	// Every event is numbered, and the status counts them: the UI keeps an
	// event's state over a status read before it.
	mu.Lock()
	for i, ev := range published {
		raw, err := json.Marshal(ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Kind string `json:"kind"`
			Seq  uint64 `json:"seq"`
		}
		if err := json.Unmarshal(raw, &got); err != nil || got.Kind == "" || got.Seq != uint64(i+1) {
			t.Errorf("event %d published as %s, want kind and seq %d", i, raw, i+1)
		}
	}
	if len(published) == 0 || st.Seq != uint64(len(published)) {
		t.Errorf("the status counts %d events, %d were published", st.Seq, len(published))
	}
	mu.Unlock()
	if code, _ := uiRequest(t, u, "POST", "/ui/download/load", ""); code != 200 || loaded != st.ModelDir {
		t.Errorf("load: %d, loaded %q", code, loaded)
	}
	// Planned again later (a new session), the cache is complete: done.
	dm2 := newDownloadManager(nil)
	defer dm2.Close()
	newUIAPI(demoModel(t), newSettingsStore(settings), dm2)
	dm2.Do("plan")
	for dm2.Status().Planning {
		time.Sleep(10 * time.Millisecond)
	}
	if st := dm2.Status(); st.State != download.StateDone || st.CacheDir != folder {
		t.Errorf("a complete cache plans as %s in %s, want done in %s", st.State, st.CacheDir, folder)
	}
}

// TestLoadModelRefuses: a directory that holds no model, or one that does
// not fit, is refused before the engine being served stops.
func TestLoadModelRefuses(t *testing.T) {
	t.Setenv("SPOOL_SETTINGS", filepath.Join(t.TempDir(), "settings.json"))
	t.Setenv("HF_HUB_OFFLINE", "1")
	model := demoModel(t)
	rt, err := newAppRuntime(&appFlags{model: model, memory: "64GiB"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.downloads.Close()
	if err := rt.checkModel(); err != nil {
		t.Fatalf("the demo model: %v", err)
	}
	if err := rt.loadModel(t.TempDir()); err == nil || !strings.Contains(err.Error(), "cannot serve") {
		t.Errorf("an empty directory: %v, want a refusal", err)
	}
	rt.flags.memory = "1GiB"
	if err := rt.loadModel(model); err == nil {
		t.Error("a model that does not fit in 1 GiB was loaded")
	}
	if rt.flags.model != model || rt.engine.Running() {
		t.Errorf("after the refusals: model %q, running %v", rt.flags.model, rt.engine.Running())
	}
	if s, _ := loadSettings(rt.settings.path); s.ModelDir != "" {
		t.Errorf("a refused model was saved: %q", s.ModelDir)
	}
}
