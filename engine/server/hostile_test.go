package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/chat"
)

func TestHostileTemplateIsRefusedNotFatal(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true})
	for _, src := range []string{
		`{% for i in range(10**12) %}x{% endfor %}`,
		`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`,
		`{{ 'x' * 10000000000 }}`,
		`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`,
	} {
		tmpl, err := chat.ParseTemplate(src)
		if err != nil {
			t.Fatal(err)
		}
		ts.setTemplate(t, tmpl)
		status, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(nil))
		msg, _ := jpath(body, "error", "message").(string)
		if status != http.StatusUnprocessableEntity || !strings.Contains(msg, "template limit exceeded") {
			t.Errorf("%s: status %d %q, want 422 naming the limit", src, status, msg)
		}
	}
	// The server is still serving.
	if status, _, _ := ts.do(t, "GET", "/health", nil); status != 200 {
		t.Fatalf("/health after hostile templates: %d", status)
	}
}

func TestMoreMessagesThanContextAreRefusedUnrendered(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true, sched: schedulerConfig{ContextLength: 256}})
	// A template that says so if it is rendered at all.
	tmpl, err := chat.ParseTemplate(`{{ raise_exception('the template was rendered') }}`)
	if err != nil {
		t.Fatal(err)
	}
	ts.setTemplate(t, tmpl)
	msgs := make([]any, 257)
	for i := range msgs {
		msgs[i] = map[string]any{"role": "user", "content": ""}
	}
	status, body, _ := ts.do(t, "POST", "/v1/chat/completions", map[string]any{"messages": msgs})
	if status != http.StatusBadRequest || jpath(body, "error", "code") != "context_length_exceeded" {
		t.Fatalf("257 messages for a 256-token context: status %d %v", status, body)
	}
	// The same template is rendered (and raises) for a request that fits.
	status, body, _ = ts.do(t, "POST", "/v1/chat/completions", map[string]any{"messages": msgs[:1]})
	if msg, _ := jpath(body, "error", "message").(string); status == http.StatusOK || !strings.Contains(msg, "the template was rendered") {
		t.Fatalf("one message: status %d %v, want the template's own error", status, body)
	}
}

func TestLongPromptIsRefusedForItsContext(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true, sched: schedulerConfig{ContextLength: 256}})
	// Too long to render within 256 tokens' worth of text, and short
	// enough to render but too many tokens: both are context errors.
	for _, long := range []string{strings.Repeat("word ", 100_000), strings.Repeat("a b ", 300)} {
		status, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(map[string]any{"messages": []any{map[string]any{"role": "user", "content": long}}}))
		msg, _ := jpath(body, "error", "message").(string)
		if status != http.StatusBadRequest || jpath(body, "error", "code") != "context_length_exceeded" || !strings.Contains(msg, "256 tokens") {
			t.Fatalf("a %d-byte prompt: status %d %q", len(long), status, msg)
		}
		t.Log(msg)
	}
}

func TestClientLeavingStopsTheRender(t *testing.T) {
	// One parse slot, and a render no limit stops: only its client leaving
	// can free the slot. A render that went on would hold it, and the next
	// request would be refused busy (503) after waiting for it.
	ts := newTestServer(t, serverOpts{noRun: true, cfg: Config{MaxParsing: 1}, sched: schedulerConfig{ContextLength: 256}})
	ts.srv.eng.RenderLimits = chat.Limits{MaxSteps: 1 << 62, MaxOutput: 1 << 20, MaxItems: 1 << 20, MaxDepth: 64, Timeout: 24 * time.Hour}
	tmpl, err := chat.ParseTemplate(`{% if messages[0].content == 'spin' %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}<|user|>{{ messages[0].content }}`)
	if err != nil {
		t.Fatal(err)
	}
	ts.setTemplate(t, tmpl)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	body := `{"messages":[{"role":"user","content":"spin"}],"max_tokens":1}`
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(body))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the spinning render answered %d", resp.StatusCode)
	}
	// A request that needs the slot and is answered at once (too long).
	long := map[string]any{"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("a b ", 300)}}}
	if status, body, _ := ts.do(t, "POST", "/v1/chat/completions", long); status != http.StatusBadRequest {
		t.Fatalf("the next request: status %d %v, want 400: the render went on after its client left and held the parse slot", status, body)
	}
}

func TestSlowUploadHoldsNoParseSlot(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true, cfg: Config{MaxParsing: 1}, sched: schedulerConfig{ContextLength: 256}})
	// A client that announces a body and sends a tenth of it.
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"messages\"")
	time.Sleep(100 * time.Millisecond)
	// Had the upload taken the one slot, this request would wait for it
	// and be refused busy (503): the upload is never finished.
	long := map[string]any{"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("a b ", 300)}}}
	if status, body, _ := ts.do(t, "POST", "/v1/chat/completions", long); status != http.StatusBadRequest {
		t.Fatalf("status %d %v, want 400: the request waited behind a slow upload", status, body)
	}
}
