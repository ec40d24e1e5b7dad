package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/promptcache"
	"github.com/spoolhq/spool/engine/scheduler"
)

// longSystem is a system prompt of some hundreds of tokens: past the demo
// model's index_topk (DSA selects keys) and many blocks long.
var longSystem = strings.Repeat("You answer questions about Python's standard library: os.path, shutil, pathlib, json and itertools. ", 12)

// TestPromptCacheUsage: with a prompt cache (and no idle sequences, so
// reuse comes from the cache), the next turn of a conversation on every
// endpoint reports the cached prefix where clients look for it, gives the
// text a server without a cache gives, and Anthropic's three input counts
// add up to the prompt.
func TestPromptCacheUsage(t *testing.T) {
	d := loadDemo(t)
	id, err := promptcache.IdentityOf(context.Background(), d.dir, "test", fingerprint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := promptcache.New(promptcache.Options{Identity: id, MemoryBytes: 64 << 20, Dir: t.TempDir(), DiskBytes: 1 << 30, MinFreeBytes: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	ts := newTestServer(t, serverOpts{sched: scheduler.Config{PromptCache: cache, IdleSequences: -1}})
	ref := newTestServer(t, serverOpts{sched: scheduler.Config{IdleSequences: -1}})
	const B = promptcache.DefaultBlockTokens

	// Both servers answer; the cached one's text is the reference's.
	both := func(path string, body map[string]any) (map[string]any, map[string]any) {
		t.Helper()
		status, got, _ := ts.do(t, "POST", path, body)
		rstatus, want, _ := ref.do(t, "POST", path, body)
		if status != 200 || rstatus != 200 {
			t.Fatalf("%s: %d %v / %d %v", path, status, got, rstatus, want)
		}
		return got, want
	}
	user := map[string]any{"role": "user", "content": question}
	system := map[string]any{"role": "system", "content": longSystem}

	t.Run("chat", func(t *testing.T) {
		first, _ := both("/v1/chat/completions", map[string]any{"messages": []any{system, user}, "max_tokens": 8, "temperature": 0})
		if c := jpath(first, "usage", "prompt_tokens_details", "cached_tokens").(float64); c != 0 {
			t.Errorf("first turn: %v cached tokens", c)
		}
		p1 := int(jpath(first, "usage", "prompt_tokens").(float64))
		if p1 <= d.dir.Config.IndexTopK {
			t.Fatalf("the first prompt has %d tokens, not past index_topk", p1)
		}
		reply := map[string]any{"role": "assistant", "content": jpath(first, "choices", 0, "message", "content")}
		body := map[string]any{"messages": []any{system, user, reply, map[string]any{"role": "user", "content": "And os.path.split?"}}, "max_tokens": 12, "temperature": 0}
		got, want := both("/v1/chat/completions", body)
		if c := int(jpath(got, "usage", "prompt_tokens_details", "cached_tokens").(float64)); c < p1/B*B {
			t.Errorf("second turn: %d cached tokens, want at least %d", c, p1/B*B)
		}
		if g, w := jpath(got, "choices", 0, "message", "content"), jpath(want, "choices", 0, "message", "content"); g != w {
			t.Errorf("second turn: %q, without the cache %q", g, w)
		}
		// Streamed, the usage chunk reports it too.
		body["stream"], body["stream_options"] = true, map[string]any{"include_usage": true}
		evs := ts.stream(t, "/v1/chat/completions", body)
		last := decode(t, evs[len(evs)-2].data) // before [DONE]
		if c := jpath(last, "usage", "prompt_tokens_details", "cached_tokens"); c == nil || int(c.(float64)) < p1/B*B {
			t.Errorf("streamed usage: %v", last["usage"])
		}
		_, st, _ := ts.do(t, "GET", "/stats", nil)
		if r := jpath(st, "last_turn", "restored_tokens"); r == nil || int(r.(float64)) < p1/B*B {
			t.Errorf("/stats last_turn: %v", st["last_turn"])
		}
	})

	t.Run("completions", func(t *testing.T) {
		prompt := longSystem + "\nQ: " + question + "\nA:"
		first, _ := both("/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 6, "temperature": 0})
		p1 := int(jpath(first, "usage", "prompt_tokens").(float64))
		got, want := both("/v1/completions", map[string]any{"prompt": prompt + " It joins paths.\nQ: And os.path.split?\nA:", "max_tokens": 10, "temperature": 0})
		if c := int(jpath(got, "usage", "prompt_tokens_details", "cached_tokens").(float64)); c < (p1-2)/B*B {
			t.Errorf("second prompt: %d cached tokens, want at least %d", c, (p1-2)/B*B)
		}
		if g, w := jpath(got, "choices", 0, "text"), jpath(want, "choices", 0, "text"); g != w {
			t.Errorf("%q, without the cache %q", g, w)
		}
	})

	t.Run("messages", func(t *testing.T) {
		inputs := func(m map[string]any) (read, created, rest int) {
			u := m["usage"]
			return int(jpath(u, "cache_read_input_tokens").(float64)), int(jpath(u, "cache_creation_input_tokens").(float64)), int(jpath(u, "input_tokens").(float64))
		}
		body := map[string]any{"system": "Anthropic. " + longSystem, "messages": []any{user}, "max_tokens": 8, "temperature": 0}
		first, _ := both("/v1/messages", body)
		read, created, rest := inputs(first)
		_, ws, _ := ref.do(t, "POST", "/v1/messages/count_tokens", map[string]any{"system": body["system"], "messages": body["messages"]})
		p1 := int(ws["input_tokens"].(float64))
		if read != 0 || created < p1/B*B-B || read+created+rest < p1-1 {
			t.Errorf("first turn: read %d, created %d, rest %d of about %d", read, created, rest, p1)
		}
		text := jpath(first, "content", 0, "text")
		body["messages"] = []any{user, map[string]any{"role": "assistant", "content": text}, map[string]any{"role": "user", "content": "And os.path.split?"}}
		body["max_tokens"] = 12
		got, want := both("/v1/messages", body)
		read, created, rest = inputs(got)
		wr, wc, wrest := inputs(want)
		if read < p1/B*B || read+created+rest != wr+wc+wrest {
			t.Errorf("second turn: read %d, created %d, rest %d; the prompt is %d", read, created, rest, wr+wc+wrest)
		}
		if g, w := jpath(got, "content", 0, "text"), jpath(want, "content", 0, "text"); g != w {
			t.Errorf("%q, without the cache %q", g, w)
		}
	})

	t.Run("responses", func(t *testing.T) {
		body := map[string]any{"instructions": "Responses. " + longSystem, "input": question, "max_output_tokens": 8, "temperature": 0}
		first, _ := both("/v1/responses", body)
		p1 := int(jpath(first, "usage", "input_tokens").(float64))
		body["input"] = []any{
			map[string]any{"role": "user", "content": question},
			map[string]any{"role": "assistant", "content": first["output_text"]},
			map[string]any{"role": "user", "content": "And os.path.split?"},
		}
		got, want := both("/v1/responses", body)
		if c := int(jpath(got, "usage", "input_tokens_details", "cached_tokens").(float64)); c < p1/B*B {
			t.Errorf("second turn: %d cached tokens, want at least %d", c, p1/B*B)
		}
		if got["output_text"] != want["output_text"] {
			t.Errorf("%q, without the cache %q", got["output_text"], want["output_text"])
		}
	})
}
