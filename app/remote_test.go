package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/remote/standin"
	"github.com/spoolhq/spool/engine/server"
	"github.com/spoolhq/spool/engine/status"
	"github.com/spoolhq/spool/internal/jsonvalue"
)

const testRemoteKey = "remote-secret-0123456789"

func TestEngineSettings(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"engine":"local"}`, ""},
		{`{"engine":"remote","remote_url":"http://gpu:8000/v1","remote_key":"k"}`, ""},
		{`{"remote_url":"http://gpu:8000"}`, ""},
		{`{"engine":"remote"}`, "no server URL"},
		{`{"engine":"cloud"}`, "engine"},
		{`{"engine":"remote","remote_url":"gpu:8000"}`, "http://"},
		{`{"engine":"remote","remote_url":"http://u:p@gpu:8000"}`, "user or password"},
		{`{"engine":"remote","remote_url":"http://gpu","remote_key":"a\nb"}`, "line break"},
	} {
		_, err := parseSettings([]byte(tc.doc))
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
	s := appSettings{Engine: engineRemote, RemoteURL: "http://gpu:8000", RemoteKey: "k"}
	if s.forBrowser().RemoteKey != "" || s.remoteConfig().Key != "k" || (appSettings{RemoteURL: "http://gpu"}).remoteConfig().URL != "" {
		t.Fatal("engine settings helpers")
	}
	if got := (appSettings{Port: 1}).withEngineOf(s); got.Port != 1 || got.RemoteKey != "k" || got.Engine != engineRemote {
		t.Fatalf("%+v", got)
	}
}

func TestRemoteFlags(t *testing.T) {
	t.Setenv("SPOOL_REMOTE_KEY", "from-env")
	for _, tc := range []struct {
		f        remoteFlags
		saved    appSettings
		url, key string
		err      string
	}{
		{f: remoteFlags{}, url: ""},
		{f: remoteFlags{url: "http://gpu:8000"}, url: "http://gpu:8000", key: "from-env"},
		{f: remoteFlags{url: "http://gpu:8000", key: "flag"}, url: "http://gpu:8000", key: "flag"},
		{f: remoteFlags{key: "flag"}, err: "needs --remote"},
		{f: remoteFlags{url: "gpu"}, err: "http://"},
		{f: remoteFlags{key: "flag"}, saved: appSettings{Engine: engineRemote, RemoteURL: "http://saved"}, url: "http://saved", key: "flag"},
		{f: remoteFlags{}, saved: appSettings{Engine: engineRemote, RemoteURL: "http://saved", RemoteKey: "s"}, url: "http://saved", key: "s"},
		{f: remoteFlags{url: "http://flag"}, saved: appSettings{Engine: engineRemote, RemoteURL: "http://saved", RemoteKey: "s"}, url: "http://flag", key: "from-env"},
	} {
		cfg, err := tc.f.over(tc.saved)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: %v, want %q", tc.f, err, tc.err)
			}
			continue
		}
		if err != nil || cfg.URL != tc.url || cfg.Key != tc.key {
			t.Errorf("%+v over %+v: %+v %v", tc.f, tc.saved, cfg, err)
		}
	}
}

func newStandin(t *testing.T, key string) (*standin.Server, string) {
	t.Helper()
	vs := standin.New(standin.Options{Key: key})
	hs := httptest.NewServer(vs)
	t.Cleanup(hs.Close)
	return vs, hs.URL
}

func TestUIEngine(t *testing.T) {
	vs, url := newStandin(t, testRemoteKey)
	dm := newDownloadManager(nil)
	defer dm.Close()
	path := filepath.Join(t.TempDir(), "settings.json")
	u := newUIAPI(t.TempDir(), newSettingsStore(path), dm)

	if code, v := uiRequest(t, u, "GET", "/ui/engine", ""); code != 200 || v["engine"] != engineLocal || v["remote_key_set"] != false {
		t.Fatalf("%d %v", code, v)
	}
	body := `{"engine":"remote","remote_url":"` + url + `/v1","remote_key":"` + testRemoteKey + `"}`
	code, v := uiRequest(t, u, "PUT", "/ui/engine", body)
	if code != 200 || v["engine"] != engineRemote || v["remote_key_set"] != true {
		t.Fatalf("%d %v", code, v)
	}
	saved, _ := loadSettings(path)
	if saved.RemoteKey != testRemoteKey || saved.Engine != engineRemote {
		t.Fatalf("saved %+v", saved)
	}
	// No answer carries the key.
	for _, p := range []string{"/ui/engine", "/ui/settings"} {
		r := httptest.NewRequest("GET", p, nil)
		w := httptest.NewRecorder()
		u.ServeHTTP(w, r)
		if w.Code != 200 || strings.Contains(w.Body.String(), testRemoteKey) {
			t.Fatalf("%s: %d %s", p, w.Code, w.Body)
		}
	}
	// The other settings' page saves without touching the engine.
	if code, _ := uiRequest(t, u, "PUT", "/ui/settings", `{"port":9100}`); code != 200 {
		t.Fatal(code)
	}
	if s, _ := loadSettings(path); s.Port != 9100 || s.RemoteKey != testRemoteKey || s.Engine != engineRemote {
		t.Fatalf("after PUT /ui/settings: %+v", s)
	}
	// Checking the saved server sends it the saved key; another server
	// never gets it.
	if code, st := uiRequest(t, u, "POST", "/ui/engine/check", `{"remote_url":"`+url+`/v1"}`); code != 200 || st["reachable"] != true || jsonvalue.Lookup(st, "models", 0, "id") != "glm-5.2-fp8" {
		t.Fatalf("%d %v", code, st)
	}
	other, otherURL := newStandin(t, "")
	if code, st := uiRequest(t, u, "POST", "/ui/engine/check", `{"remote_url":"`+otherURL+`"}`); code != 200 || st["reachable"] != true {
		t.Fatalf("%d %v", code, st)
	}
	if r, _ := other.Last("/v1/models"); r.Header.Get("Authorization") != "" {
		t.Fatalf("the saved key went to another server: %v", r.Header)
	}
	if code, st := uiRequest(t, u, "POST", "/ui/engine/check", `{"remote_url":"`+url+`","remote_key":"wrong"}`); code != 200 || st["reachable"] != false || st["error"] == nil {
		t.Fatalf("%d %v", code, st)
	}
	_ = vs
	// A new server without a key drops the old server's key.
	if code, v := uiRequest(t, u, "PUT", "/ui/engine", `{"engine":"remote","remote_url":"`+otherURL+`"}`); code != 200 || v["remote_key_set"] != false {
		t.Fatalf("%d %v", code, v)
	}
	for _, bad := range []string{`{"engine":"remote"}`, `{"engine":"remote","remote_url":"ftp://x"}`, `{"engine":"gpu"}`, `{"engine":"local","extra":1}`} {
		if code, _ := uiRequest(t, u, "PUT", "/ui/engine", bad); code != 400 {
			t.Errorf("%s: %d", bad, code)
		}
	}
	if code, v := uiRequest(t, u, "PUT", "/ui/engine", `{"engine":"local"}`); code != 200 || v["engine"] != engineLocal {
		t.Fatalf("%d %v", code, v)
	}
}

// The supervisor forwards to a remote engine: no model is loaded, the API and
// the UI are served, the remote's state is known.
func TestEngineHostRemote(t *testing.T) {
	_, url := newStandin(t, testRemoteKey)
	dm := newDownloadManager(nil)
	defer dm.Close()
	cfg := supervisorConfig{
		Config: host.Config{ModelDir: filepath.Join(t.TempDir(), "no-model")},
		Server: server.Config{Host: "127.0.0.1", Port: freePort(t)},
	}
	cfg.Remote.URL, cfg.Remote.Key = url, testRemoteKey
	assets := fstest.MapFS{"index.html": {Data: []byte("<!doctype html>spool ui")}}
	u := newUIAPI(cfg.ModelDir, newSettingsStore(filepath.Join(t.TempDir(), "settings.json")), dm)
	h := newSupervisor(cfg, assets, u, nil)
	h.Start(context.Background())
	defer h.Stop()
	st := waitState(t, h, engineReady)
	if st.Remote != url || st.Detail != "" {
		t.Fatalf("%+v", st)
	}
	resp, err := http.Post(st.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(data), "You said: hi") {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	if s := stats(t, st.URL); jsonvalue.Lookup(s, "engine", "kind") != "remote" || jsonvalue.Lookup(s, "engine", "remote", "reachable") != true {
		t.Fatalf("%v", s)
	}
	if rs, ok := h.remoteStatus(); !ok || rs.Last == nil || rs.Last.CompletionTokens != 3 {
		t.Fatalf("%+v %v", rs, ok)
	}
	if code, v := uiRequest(t, u, "GET", "/ui/engine", ""); code != 200 || jsonvalue.Lookup(v, "running", "remote") != url || jsonvalue.Lookup(v, "remote", "reachable") != true {
		t.Fatalf("%d %v", code, v)
	}
	h.Stop()
	if _, ok := h.remoteStatus(); ok {
		t.Fatal("a remote status after stop")
	}
}

// syncBuffer is a bytes.Buffer safe for the command's and the test's
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// `spool serve --remote` end to end, in-process: it serves a remote that
// is down at the start, says so, and recovers; the key reaches no output.
func TestServeRemote(t *testing.T) {
	t.Setenv("SPOOL_MODEL", filepath.Join(t.TempDir(), "none"))
	t.Setenv("SPOOL_SETTINGS", filepath.Join(t.TempDir(), "settings.json"))
	// The remote's port is closed until the stand-in starts on it.
	remotePort := freePort(t)
	remoteURL := "http://127.0.0.1:" + strconv.Itoa(remotePort)
	port := freePort(t)
	cmd := newRootCmd()
	var out syncBuffer
	cmd.SetErr(&out)
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"serve", "--remote", remoteURL + "/v1", "--remote-key", testRemoteKey, "--port", strconv.Itoa(port), "--api-key", "front"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "serving the remote engine at "+remoteURL+" on "+base) {
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready line: %s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "does not answer yet") {
		t.Fatalf("the remote being down was not said: %s", out.String())
	}
	post := func() (int, string) {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(`{"model":"spool","messages":[{"role":"user","content":"ping"}]}`))
		req.Header.Set("Authorization", "Bearer front")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(); code != 502 || !strings.Contains(body, "remote_unreachable") {
		t.Fatalf("%d %s", code, body)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(remotePort))
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: standin.New(standin.Options{Key: testRemoteKey})}
	go hs.Serve(ln)
	defer hs.Close()
	if code, body := post(); code != 200 || !strings.Contains(body, "You said: ping") {
		t.Fatalf("%d %s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), testRemoteKey) {
		t.Fatalf("the remote key was printed: %s", out.String())
	}
	if _, err := os.Stat(os.Getenv("SPOOL_SETTINGS")); err == nil {
		t.Fatal("serve wrote the settings")
	}
}

func TestEngineMenu(t *testing.T) {
	now := time.Now()
	saved := appSettings{Engine: engineRemote, RemoteURL: "http://gpu-box:8000/v1"}
	reach := remote.Status{Reachable: true, CheckedAt: &now, LatencyMS: 12.4, Last: &remote.Turn{DecodeTokensPerSecond: 41.26}}
	down := remote.Status{CheckedAt: &now, Error: "refused"}
	for _, tc := range []struct {
		s       appSettings
		running engineStatus
		rs      *remote.Status
		want    engineMenuView
	}{
		{appSettings{}, engineStatus{State: engineReady}, nil,
			engineMenuView{Title: "Engine: this Mac", Local: true, ServerTitle: "A server… (set one in Settings)"}},
		{saved, engineStatus{State: engineReady}, nil,
			engineMenuView{Title: "Engine: a server (applies at the next start)", Server: true, ServerTitle: "A server (gpu-box:8000)", ServerSet: true}},
		{saved, engineStatus{State: engineReady, Remote: "http://gpu-box:8000"}, &reach,
			engineMenuView{Title: "Engine: gpu-box:8000 · 12 ms · 41.3 tok/s", Server: true, ServerTitle: "A server (gpu-box:8000)", ServerSet: true}},
		{saved, engineStatus{State: engineReady, Remote: "http://gpu-box:8000"}, &down,
			engineMenuView{Title: "Engine: gpu-box:8000 · not reachable", Server: true, ServerTitle: "A server (gpu-box:8000)", ServerSet: true}},
		{saved, engineStatus{State: engineLoading, Remote: "http://gpu-box:8000"}, nil,
			engineMenuView{Title: "Engine: gpu-box:8000 · connecting", Server: true, ServerTitle: "A server (gpu-box:8000)", ServerSet: true}},
	} {
		if got := engineMenu(tc.s, tc.running, tc.rs); got != tc.want {
			t.Errorf("%+v %+v:\n got %+v\nwant %+v", tc.s, tc.running, got, tc.want)
		}
	}
}

func TestRemoteStatusLine(t *testing.T) {
	up := &status.RemoteSummary{Endpoint: "http://gpu-box:8000", Reachable: true}
	for _, tc := range []struct {
		srv  status.Status
		want string
	}{
		{status.Status{State: status.Ready, Model: "glm-5.2-fp8", Remote: up, Last: &status.RequestSummary{DecodeTokensPerSecond: 41.26}}, "Server gpu-box:8000 · glm-5.2-fp8 · last reply 41.3 tok/s"},
		{status.Status{State: status.Generating, Model: "glm-5.2-fp8", Remote: up}, "Server gpu-box:8000 · generating"},
		{status.Status{State: status.Ready, Remote: &status.RemoteSummary{Endpoint: "http://gpu-box:8000"}}, "Server gpu-box:8000 not reachable"},
	} {
		if got := statusLine(engineStatus{State: engineReady, URL: "http://127.0.0.1:8484", Remote: "http://gpu-box:8000"}, &tc.srv); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}
