package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestDamagedExpertAnswer: a server on a streamed model, fingerprinted at
// open, whose shard's expert payload is overwritten with zeros while it
// serves answers the next request that reads a damaged expert with a
// clean server error naming the shard (no local path), streamed or not,
// and never with other text.
func TestDamagedExpertAnswer(t *testing.T) {
	ctx := context.Background()
	src := fixtures.Path(t, "glm52-mini")
	dir := fixtures.CopyModel(t, src)
	d, err := loader.OpenHeaders(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.Fingerprint(ctx, fingerprint.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	err = d.Load(ctx, loader.Options{Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
		return experts.NewStreamed(ctx, c, cfg, layers, experts.StreamOptions{WorkingSlots: 16, Logger: slog.New(slog.DiscardHandler)})
	}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(src, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(src)
	if err != nil {
		t.Fatal(err)
	}
	sched := scheduler.New(d.Model, scheduler.Config{})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(runCtx)
	}()
	srv, err := New(Config{ModelID: "glm52-mini", Logger: slog.New(slog.DiscardHandler)}, Engine{Scheduler: sched, Tokenizer: tok, Template: tmpl})
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
	ts := &testServer{Server: hs, srv: srv, sched: sched}
	body := map[string]any{"messages": []map[string]any{{"role": "user", "content": "Hello"}}, "max_tokens": 4, "temperature": 0}
	if status, _, _ := ts.do(t, "POST", "/v1/chat/completions", body); status != http.StatusOK {
		t.Fatalf("before the damage: status %d", status)
	}

	// Zeros over the middle of every routed expert's weights of the
	// first sparse layer, in place: every forward reads one.
	cfg := d.Config
	layer := cfg.SparseLayers()[0]
	for e := range cfg.NumRoutedExperts {
		loc, err := d.Container.Expert(layer, e, cfg)
		if err != nil {
			t.Fatal(err)
		}
		x := loc.Weights[0]
		f, err := os.OpenFile(filepath.Join(dir, x.File), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, 64), x.Offset+x.Length/2); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	status, resp, _ := ts.do(t, "POST", "/v1/chat/completions", body)
	code, _ := jpath(resp, "error", "code").(string)
	msg, _ := jpath(resp, "error", "message").(string)
	if status != http.StatusInternalServerError || code != "model_file_damaged" || !strings.Contains(msg, ".safetensors") || !strings.Contains(msg, "expert") {
		t.Fatalf("after the damage: status %d, %v; want 500 model_file_damaged naming the shard", status, resp)
	}
	if strings.Contains(msg, dir) || strings.Contains(msg, os.TempDir()) {
		t.Errorf("the client is told a local path: %q", msg)
	}
	body["stream"] = true
	events := ts.stream(t, "/v1/chat/completions", body)
	var sawErr bool
	for _, ev := range events {
		if strings.Contains(ev.data, "model_file_damaged") {
			sawErr = true
		}
		if strings.Contains(ev.data, dir) {
			t.Errorf("a stream event tells a local path: %s", ev.data)
		}
	}
	if !sawErr {
		t.Errorf("the stream ended without the damage: %+v", events)
	}
	// /health says the engine is degraded, and why, without the path.
	status, h, _ := ts.do(t, "GET", "/health", nil)
	reason, _ := h["error"].(string)
	if status != http.StatusServiceUnavailable || h["status"] != "degraded" || !strings.Contains(reason, "damaged") || strings.Contains(reason, dir) {
		t.Errorf("/health after the damage: %d %v", status, h)
	}
}
