package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/remote/standin"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/status"
	"github.com/spoolhq/spool/internal/ssecheck"
)

// servedServer is a Server running Serve on a loopback port, its
// scheduler running until Serve has returned (as the app runs them).
type servedServer struct {
	url   string
	srv   *Server
	stop  context.CancelFunc // begins the server's stop
	ended chan error         // Serve's result
}

func newServedServer(t *testing.T, cfg Config, sched scheduler.Config, constraints ConstraintCompiler) *servedServer {
	t.Helper()
	d := loadDemo(t)
	sc := scheduler.New(d.dir.Model, sched)
	schedCtx, stopSched := context.WithCancel(context.Background())
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		sc.Run(schedCtx)
	}()
	cfg.ModelID = "glm52-mini"
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := New(cfg, Engine{Scheduler: sc, Tokenizer: d.tok, Template: d.tmpl, Constraints: constraints})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ss := &servedServer{url: "http://" + ln.Addr().String(), srv: srv, stop: cancel, ended: make(chan error, 1)}
	go func() {
		err := srv.Serve(ctx, ln)
		stopSched()
		<-schedDone
		ss.ended <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ss.ended:
		default:
		}
	})
	return ss
}

// endless is a constraint that never completes and never lets an end of
// text through: a generation under it runs until max_tokens or a cut.
func endless(eos []int) ConstraintCompiler {
	return func(json.RawMessage) (scheduler.Constraint, error) { return endlessConstraint(eos), nil }
}

type endlessConstraint []int

func (c endlessConstraint) Mask(allowed []uint64) {
	for i := range allowed {
		allowed[i] = ^uint64(0)
	}
	for _, id := range c {
		allowed[id/64] &^= 1 << (id % 64)
	}
}
func (endlessConstraint) Accept(int) error { return nil }
func (endlessConstraint) Done() bool       { return false }

// shapeResult is how one API shape's request ended.
type shapeResult struct {
	status int
	header http.Header
	body   string
	err    error
}

// shape is one API shape: a request body and how to tell an honest end
// of it from a lie.
type shape struct {
	name, path string
	body       map[string]any
	stream     bool
	// check says what is wrong with the answer of a request the server
	// cut ("" for nothing).
	check func(r shapeResult) string
}

// refused checks a 503 answer with Retry-After in the envelope of the
// path's API.
func refused(envelope string) func(shapeResult) string {
	return func(r shapeResult) string {
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			return fmt.Sprintf("status %d, Retry-After %q, want 503 with Retry-After", r.status, r.header.Get("Retry-After"))
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(r.body), &body); err != nil {
			return fmt.Sprintf("body %q: %v", r.body, err)
		}
		var msg string
		switch envelope {
		case "openai":
			msg, _ = jpath(body, "error", "message").(string)
		case "anthropic":
			if body["type"] != "error" || jpath(body, "error", "type") != "overloaded_error" {
				return fmt.Sprintf("body %s", r.body)
			}
			msg, _ = jpath(body, "error", "message").(string)
		case "ollama":
			msg, _ = body["error"].(string)
		}
		if !strings.Contains(msg, "shutting down") {
			return fmt.Sprintf("body %s", r.body)
		}
		return ""
	}
}

// sseEndsInError checks a stream whose last event is its API's error.
func sseEndsInError(name string) func(shapeResult) string {
	return func(r shapeResult) string {
		if r.status != 200 {
			return fmt.Sprintf("status %d", r.status)
		}
		evs, err := ssecheck.Check([]byte(r.body))
		if err != nil || len(evs) == 0 {
			return fmt.Sprintf("stream %q: %v", r.body, err)
		}
		last := evs[len(evs)-1]
		switch {
		case strings.Contains(r.body, "[DONE]") || strings.Contains(r.body, "response.completed") || strings.Contains(r.body, "message_stop"):
			return "the stream says it completed: " + r.body
		case last.Name != name || !strings.Contains(last.Data, "shutting down"):
			return fmt.Sprintf("last event %+v", last)
		}
		return ""
	}
}

// either accepts an answer that one of two checks accepts.
func either(a, b func(shapeResult) string) func(shapeResult) string {
	return func(r shapeResult) string {
		msg := a(r)
		if msg == "" {
			return ""
		}
		if other := b(r); other != "" {
			return msg + "; or " + other
		}
		return ""
	}
}

// ndjsonEndsInError checks an Ollama stream whose last line is an error.
func ndjsonEndsInError(r shapeResult) string {
	lines := strings.Split(strings.TrimSpace(r.body), "\n")
	var last map[string]any
	if r.status != 200 || json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil {
		return fmt.Sprintf("status %d, body %q", r.status, r.body)
	}
	if msg, _ := last["error"].(string); !strings.Contains(msg, "shutting down") || strings.Contains(r.body, `"done":true`) {
		return fmt.Sprintf("last line %s", lines[len(lines)-1])
	}
	return ""
}

// apiShapes are the requests of every API shape, each constrained to
// run until it is cut.
func apiShapes(eos []int) []shape {
	bias := map[string]any{}
	for _, id := range eos {
		bias[fmt.Sprint(id)] = -100
	}
	user := []any{map[string]any{"role": "user", "content": "Tell me everything."}}
	chat := func(stream bool) map[string]any {
		return map[string]any{"messages": user, "max_tokens": 1500, "stream": stream, "response_format": map[string]any{"type": "json_object"}}
	}
	completion := func(stream bool) map[string]any {
		return map[string]any{"prompt": "Once upon a time", "max_tokens": 1500, "stream": stream, "logit_bias": bias}
	}
	responses := func(stream bool) map[string]any {
		return map[string]any{"input": "Tell me everything.", "max_output_tokens": 1500, "stream": stream, "text": map[string]any{"format": map[string]any{"type": "json_object"}}}
	}
	messages := func(stream bool) map[string]any {
		return map[string]any{"messages": user, "max_tokens": 1500, "stream": stream,
			"output_config": map[string]any{"format": map[string]any{"type": "json_schema", "schema": map[string]any{"type": "object"}}}}
	}
	ollamaChat := func(stream bool) map[string]any {
		return map[string]any{"model": "glm52-mini", "messages": user, "stream": stream, "format": "json", "options": map[string]any{"num_predict": 1500}}
	}
	ollamaGenerate := func(stream bool) map[string]any {
		return map[string]any{"model": "glm52-mini", "prompt": "Tell me everything.", "stream": stream, "format": "json", "options": map[string]any{"num_predict": 1500}}
	}
	return []shape{
		{name: "chat", path: "/v1/chat/completions", body: chat(false), check: refused("openai")},
		{name: "chat stream", path: "/v1/chat/completions", body: chat(true), stream: true, check: sseEndsInError("")},
		{name: "completions", path: "/v1/completions", body: completion(false), check: refused("openai")},
		{name: "completions stream", path: "/v1/completions", body: completion(true), stream: true, check: sseEndsInError("")},
		{name: "responses", path: "/v1/responses", body: responses(false), check: refused("openai")},
		{name: "responses stream", path: "/v1/responses", body: responses(true), stream: true, check: sseEndsInError("error")},
		{name: "messages", path: "/v1/messages", body: messages(false), check: refused("anthropic")},
		{name: "messages stream", path: "/v1/messages", body: messages(true), stream: true, check: sseEndsInError("error")},
		{name: "ollama chat", path: "/api/chat", body: ollamaChat(false), check: refused("ollama")},
		{name: "ollama chat stream", path: "/api/chat", body: ollamaChat(true), stream: true, check: ndjsonEndsInError},
		{name: "ollama generate", path: "/api/generate", body: ollamaGenerate(false), check: refused("ollama")},
		{name: "ollama generate stream", path: "/api/generate", body: ollamaGenerate(true), stream: true, check: ndjsonEndsInError},
	}
}

func postShape(url string, sh shape) shapeResult {
	raw, _ := json.Marshal(sh.body)
	resp, err := http.Post(url+sh.path, "application/json", strings.NewReader(string(raw)))
	if err != nil {
		return shapeResult{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return shapeResult{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

// waitGenerating waits until n requests are generating (each has its
// first token), so that a stop finds them all in flight.
func waitGenerating(t *testing.T, srv *Server, n int) {
	t.Helper()
	for {
		st := srv.Status()
		gen := 0
		for _, r := range st.Requests {
			if r.Phase == status.Generating {
				gen++
			}
		}
		if gen >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestShutdownCutsInFlight: a server stopped with generations of every API
// shape in flight, past its grace period, tells each client the truth:
// a 503 with Retry-After in the API's envelope when nothing was answered
// yet, the stream's error event (never its end marker) after, an error
// event and a 1001 close on the Responses WebSocket. It was 200 with an
// empty body and streams that stopped without a word.
func TestShutdownCutsInFlight(t *testing.T) {
	eos := loadDemo(t).dir.Config.EOSTokenIDs
	ss := newServedServer(t, Config{ShutdownGrace: time.Nanosecond}, scheduler.Config{MaxBatch: 16, MaxQueue: 16, ContextLength: 2048}, endless(eos))
	shapes := apiShapes(eos)
	results := make([]shapeResult, len(shapes))
	var wg sync.WaitGroup
	for i, sh := range shapes {
		wg.Go(func() { results[i] = postShape(ss.url, sh) })
	}
	// The Responses WebSocket.
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ss.url, "http")+"/v1/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.WriteJSON(map[string]any{"type": "response.create", "input": "Tell me everything.", "max_output_tokens": 1500,
		"text": map[string]any{"format": map[string]any{"type": "json_object"}}}); err != nil {
		t.Fatal(err)
	}
	var wsEvents []map[string]any
	var closeErr error
	wg.Go(func() {
		for {
			var ev map[string]any
			if err := conn.ReadJSON(&ev); err != nil {
				closeErr = err
				return
			}
			wsEvents = append(wsEvents, ev)
		}
	})
	waitGenerating(t, ss.srv, len(shapes)+1)
	ss.stop()
	wg.Wait()
	if err := <-ss.ended; err != nil {
		t.Errorf("Serve: %v", err)
	}
	for i, sh := range shapes {
		if results[i].err != nil {
			t.Errorf("%s: %v", sh.name, results[i].err)
			continue
		}
		if msg := sh.check(results[i]); msg != "" {
			t.Errorf("%s: %s", sh.name, msg)
		}
	}
	if n := len(wsEvents); n == 0 || wsEvents[n-1]["type"] != "error" || !strings.Contains(fmt.Sprint(wsEvents[n-1]), "shutting down") {
		t.Errorf("the socket's last event: %v", wsEvents[max(0, len(wsEvents)-1):])
	}
	if !websocket.IsCloseError(closeErr, websocket.CloseGoingAway) {
		t.Errorf("the socket ended with %v, want a 1001 close", closeErr)
	}
}

// TestShutdownDrains: a stop lets a running generation finish within the
// grace period (its answer whole), refuses the one still queued at once
// with 503 and Retry-After, and Serve returns once the running one ended.
func TestShutdownDrains(t *testing.T) {
	eos := loadDemo(t).dir.Config.EOSTokenIDs
	ss := newServedServer(t, Config{ShutdownGrace: time.Hour}, scheduler.Config{MaxBatch: 1, MaxQueue: 4, ContextLength: 2048}, endless(eos))
	// The running one: a stream, read line by line, held between lines
	// by the test so that it is still running when the stop begins.
	body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 40, "stream": true,
		"response_format": map[string]any{"type": "json_object"}})
	resp, err := http.Post(ss.url+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	var head strings.Builder
	for !strings.Contains(head.String(), `"content":"`) || strings.Count(head.String(), "data: ") < 2 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		head.WriteString(line)
	}
	// The queued one.
	queued := make(chan shapeResult, 1)
	go func() {
		queued <- postShape(ss.url, shape{path: "/v1/chat/completions", body: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 4}})
	}()
	for ss.srv.Status().Queued == 0 {
		time.Sleep(time.Millisecond)
	}
	ss.stop()
	if r := <-queued; refused("openai")(r) != "" {
		t.Errorf("the queued request: %s", refused("openai")(r))
	}
	select {
	case err := <-ss.ended:
		t.Fatalf("Serve returned (%v) with a generation running", err)
	default:
	}
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	all := head.String() + string(rest)
	if _, err := ssecheck.Check([]byte(all)); err != nil || !strings.HasSuffix(all, "data: [DONE]\n\n") || !strings.Contains(all, `"finish_reason":"length"`) {
		t.Errorf("the running stream did not end whole (%v):\n%s", err, all)
	}
	if err := <-ss.ended; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestShutdownRemote: a server forwarding to a remote engine, stopped
// with requests in flight past its grace period, answers them as a local
// engine's: 503 with Retry-After, or the stream's error event.
func TestShutdownRemote(t *testing.T) {
	vs := standin.New(standin.Options{Key: remoteKey})
	hs := httptest.NewServer(vs)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	rc, err := remote.New(remote.Config{URL: hs.URL + "/v1", Key: remoteKey})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewRemote(Config{ShutdownGrace: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)}, rc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ended := make(chan error, 1)
	go func() { ended <- srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	shapes := []shape{
		{name: "chat", path: "/v1/chat/completions", body: userChat("[[sleep 1h]]", nil), check: refused("openai")},
		// A stream the remote has not begun yet is refused whole.
		{name: "chat stream", path: "/v1/chat/completions", body: userChat("go on [[stall]]", map[string]any{"stream": true}), check: either(refused("openai"), sseEndsInError(""))},
		{name: "messages stream", path: "/v1/messages", body: map[string]any{"max_tokens": 9, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "[[stall]]"}}},
			check: either(refused("anthropic"), sseEndsInError("error"))},
	}
	results := make([]shapeResult, len(shapes))
	var wg sync.WaitGroup
	for i, sh := range shapes {
		wg.Go(func() { results[i] = postShape(url, sh) })
	}
	for srv.remote.Status().Active < len(shapes) {
		time.Sleep(time.Millisecond)
	}
	stop()
	wg.Wait()
	if err := <-ended; err != nil {
		t.Errorf("Serve: %v", err)
	}
	for i, sh := range shapes {
		if results[i].err != nil {
			t.Errorf("%s: %v", sh.name, results[i].err)
		} else if msg := sh.check(results[i]); msg != "" {
			t.Errorf("%s: %s (%s)", sh.name, msg, results[i].body)
		}
	}
}
