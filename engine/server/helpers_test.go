package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/internal/fixturemodel"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/internal/jsonvalue"
	"github.com/spoolhq/spool/internal/ssecheck"
)

// demo is the glm52-mini model with its tokenizer and template, loaded once.
type demo struct {
	dir  *loader.Dir
	tok  *tokenizer.Tokenizer
	tmpl *chat.Template
}

var (
	demoOnce sync.Once
	demoVal  *demo
	demoErr  error
)

func loadDemo(t *testing.T) *demo {
	t.Helper()
	path := fixtures.Path(t, "glm52-mini")
	dir := fixturemodel.Shared(t, "glm52-mini")
	demoOnce.Do(func() {
		d := &demo{dir: dir}
		if d.tok, demoErr = tokenizer.Load(filepath.Join(path, "tokenizer.json")); demoErr != nil {
			return
		}
		d.tmpl, demoErr = chat.LoadTemplate(path)
		demoVal = d
	})
	if demoErr != nil {
		t.Fatal(demoErr)
	}
	return demoVal
}

// testServer is a server on the demo model behind httptest.
type testServer struct {
	*httptest.Server
	srv   *Server
	sched *scheduler.Scheduler
	key   string
}

type serverOpts struct {
	cfg       Config
	sched     scheduler.Config
	noRun     bool // leave the scheduler stopped (requests stay queued)
	noAccess  bool // no constrained decoder
	footprint ModelFootprint
	// constraints, when set, replaces the grammar's constrained decoder.
	constraints ConstraintCompiler
}

func newTestServer(t *testing.T, o serverOpts) *testServer {
	t.Helper()
	d := loadDemo(t)
	sched := scheduler.New(d.dir.Model, o.sched)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if o.noRun {
		close(done)
	} else {
		go func() {
			defer close(done)
			sched.Run(ctx)
		}()
	}
	eng := Engine{Scheduler: sched, Tokenizer: d.tok, Template: d.tmpl, Footprint: o.footprint}
	if o.constraints != nil {
		eng.Constraints = o.constraints
	} else if !o.noAccess {
		var err error
		if eng.Constraints, err = GrammarConstraints(d.tok, d.dir.Config.EOSTokenIDs); err != nil {
			t.Fatal(err)
		}
	}
	if o.cfg.ModelID == "" {
		o.cfg.ModelID = "glm52-mini"
	}
	if o.cfg.Logger == nil {
		o.cfg.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := New(o.cfg, eng)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
	})
	return &testServer{Server: hs, srv: srv, sched: sched, key: o.cfg.APIKey}
}

// setTemplate makes tmpl the served model's template (with the render
// limits of ts.srv.eng).
func (ts *testServer) setTemplate(t *testing.T, tmpl *chat.Template) {
	t.Helper()
	ts.srv.eng.Template = tmpl
	var err error
	if ts.srv.local, err = ts.srv.newLocal(); err != nil {
		t.Fatal(err)
	}
}

// do sends a request with a JSON body (a string or a value) and returns
// the status and decoded JSON body.
func (ts *testServer) do(t *testing.T, method, path string, body any, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = strings.NewReader(string(raw))
	}
	req, err := http.NewRequest(method, ts.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if ts.key != "" {
		req.Header.Set("Authorization", "Bearer "+ts.key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: decoding %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, out, resp.Header
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

// post posts body as JSON to path with the server's API key; the caller
// closes the answer's body.
func (ts *testServer) post(t *testing.T, ctx context.Context, path string, body any) *http.Response {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if ts.key != "" {
		req.Header.Set("Authorization", "Bearer "+ts.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// stream posts body and reads the SSE events to the end.
func (ts *testServer) stream(t *testing.T, path string, body any) []sseEvent {
	t.Helper()
	resp := ts.post(t, context.Background(), path, body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream %s: status %d %s", path, resp.StatusCode, b)
	}
	return readSSE(t, resp.Body)
}

// readSSE reads an event stream to its end as the strictest clients do
// (internal/ssecheck): a blank line that dispatches no data, which
// openai-go v1.x reads as an empty event and fails on, fails the test.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	raw, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := ssecheck.Check(raw)
	if err != nil {
		t.Fatalf("%v\nstream:\n%s", err, raw)
	}
	out := make([]sseEvent, len(evs))
	for i, ev := range evs {
		out[i] = sseEvent{name: ev.Name, data: ev.Data}
	}
	return out
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	return m
}

// jpath reads a nested field: jpath(m, "choices", 0, "message", "content").
func jpath(v any, keys ...any) any { return jsonvalue.Lookup(v, keys...) }

const question = "What does the function os.path.join do?"

func chatBody(extra map[string]any) map[string]any {
	b := map[string]any{"model": "glm52-mini", "messages": []any{map[string]any{"role": "user", "content": question}}, "temperature": 0, "max_tokens": 24}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

type schedulerConfig = scheduler.Config
