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
		ts.srv.eng.Template = tmpl
		start := time.Now()
		status, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(nil))
		msg, _ := jpath(body, "error", "message").(string)
		if status != http.StatusUnprocessableEntity || !strings.Contains(msg, "template limit exceeded") {
			t.Errorf("%s: status %d %q, want 422 naming the limit", src, status, msg)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s: answered after %s", src, d)
		}
	}
	// The server is still serving.
	if status, _, _ := ts.do(t, "GET", "/health", nil); status != 200 {
		t.Fatalf("/health after hostile templates: %d", status)
	}
}

func TestMoreMessagesThanContextAreRefusedUnrendered(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true, sched: schedulerConfig{ContextLength: 256}})
	// A template that would take minutes if it were rendered.
	tmpl, err := chat.ParseTemplate(`{% for a in messages %}{% for b in messages %}{{ a.content }}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.eng.Template = tmpl
	msgs := make([]any, 257)
	for i := range msgs {
		msgs[i] = map[string]any{"role": "user", "content": ""}
	}
	start := time.Now()
	status, body, _ := ts.do(t, "POST", "/v1/chat/completions", map[string]any{"messages": msgs})
	if status != http.StatusBadRequest || jpath(body, "error", "code") != "context_length_exceeded" {
		t.Fatalf("257 messages for a 256-token context: status %d %v", status, body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("refused after %s", d)
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
	// One parse slot: a render that went on after its client left would
	// hold it for the template's time limit.
	ts := newTestServer(t, serverOpts{noRun: true, cfg: Config{MaxParsing: 1}, sched: schedulerConfig{ContextLength: 256}})
	tmpl, err := chat.ParseTemplate(`{% if messages[0].content == 'spin' %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}<|user|>{{ messages[0].content }}`)
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.eng.Template = tmpl
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	body := `{"messages":[{"role":"user","content":"spin"}],"max_tokens":1}`
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(body))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the spinning render answered %d", resp.StatusCode)
	}
	start := time.Now()
	// A request that needs the slot and is answered at once (too long).
	long := map[string]any{"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("a b ", 300)}}}
	status, _, _ := ts.do(t, "POST", "/v1/chat/completions", long)
	if status != http.StatusBadRequest {
		t.Fatalf("the long request: status %d", status)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the next request waited %s for the parse slot (status %d): the render went on after its client left", d, status)
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
	start := time.Now()
	long := map[string]any{"messages": []any{map[string]any{"role": "user", "content": strings.Repeat("a b ", 300)}}}
	if status, _, _ := ts.do(t, "POST", "/v1/chat/completions", long); status != http.StatusBadRequest {
		t.Fatalf("status %d", status)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a request waited %s behind a slow upload", d)
	}
}
