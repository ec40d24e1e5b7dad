package server

import (
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
