package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// hostileKey is a remote key that a hostile (or careless) remote echoes
// back in every place it can.
const hostileKey = "sk-remote-Secret/0123456789"

// escapedKey is the key as JSON may spell it: every character a \u escape.
func escapedKey() string {
	var b strings.Builder
	for _, r := range hostileKey {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// echoingRemote echoes the key it got in every field of every answer: error
// bodies (message, type, code, param), headers, stream events (error
// events and content) and the model list; both as written and JSON-escaped.
func echoingRemote() http.Handler {
	mux := http.NewServeMux()
	key := func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") }
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", key(r))
		fmt.Fprintf(w, `{"data":[{"id":"m-%s","owned_by":"%s","max_model_len":100}]}`, key(r), escapedKey())
	})
	mux.HandleFunc("/v1/error", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", key(r))
		w.Header().Set("X-Request-Id", key(r))
		w.WriteHeader(400)
		k := key(r)
		fmt.Fprintf(w, `{"error":{"message":"bad %s","type":"%s","code":"%s","param":"%s"}}`, escapedKey(), k, k, k)
	})
	mux.HandleFunc("/v1/detail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(422)
		fmt.Fprintf(w, `{"detail":[{"msg":"no","loc":["body","%s"]}]}`, escapedKey())
	})
	mux.HandleFunc("/v1/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		k := key(r)
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"%s and %s\"}}]}\n\n", k, escapedKey())
		fmt.Fprintf(w, "event: %s\ndata: {\"object\":\"error\",\"message\":\"%s\",\"type\":\"%s\",\"code\":\"%s\",\"param\":\"%s\"}\n\n", k, escapedKey(), k, k, escapedKey())
		fmt.Fprintf(w, "data: [DONE]\n\n")
	})
	mux.HandleFunc("/v1/body", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"choices":[{"message":{"content":"%s \"%s\" %s"}}]}`, key(r), key(r), escapedKey())
	})
	return mux
}

// No field of anything the client hands on holds the remote key: errors
// (every field), headers, stream events (raw and decoded, so the error an
// event becomes too), bodies and the model list and status.
func TestRemoteKeyNeverLeaves(t *testing.T) {
	c, _ := newTestClient(t, echoingRemote(), Config{Key: hostileKey})
	var seen []string
	look := func(what string, v any) {
		b, _ := json.Marshal(v)
		seen = append(seen, what+": "+string(b)+" "+fmt.Sprintf("%+v", v))
	}
	ctx := context.Background()
	for _, path := range []string{"/v1/error", "/v1/detail"} {
		_, err := c.Do(ctx, http.MethodPost, path, []byte(`{}`))
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: %v", path, err)
		}
		look(path, e)
		look(path, e.Error())
	}
	resp, err := c.Do(ctx, http.MethodPost, "/v1/stream", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	look("stream headers", resp.Header)
	st := c.Stream(resp)
	n := 0
	for ev := range st.Events() {
		n++
		look("event", map[string]string{"name": ev.Name, "data": string(ev.Data), "raw": string(ev.Raw)})
		var decoded any
		if json.Unmarshal(ev.Data, &decoded) == nil {
			look("decoded event", decoded)
		}
		if strings.Contains(string(ev.Data), `"error"`) {
			look("event error", ParseError(500, ev.Data))
		}
	}
	st.Close()
	if n != 3 {
		t.Fatalf("%d events, want 3", n)
	}
	resp, err = c.Do(ctx, http.MethodPost, "/v1/body", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := ReadBody(resp)
	if err != nil {
		t.Fatal(err)
	}
	var decoded any
	if err := json.Unmarshal(body, &decoded); err != nil {
		t.Fatalf("the cleaned body is not JSON: %v: %s", err, body)
	}
	look("body", string(body))
	look("decoded body", decoded)
	models, err := c.Models(ctx)
	if err != nil {
		t.Fatal(err)
	}
	look("models", models)
	for _, m := range models {
		look("model raw", string(m.Raw))
	}
	look("status", c.Status())

	all := strings.Join(seen, "\n")
	if strings.Contains(all, hostileKey) || strings.Contains(all, escapedKey()) {
		t.Fatalf("the remote key left the client:\n%s", all)
	}
	if !strings.Contains(all, "[remote key]") {
		t.Fatalf("nothing was marked as cleaned:\n%s", all)
	}
}

func FuzzScrub(f *testing.F) {
	f.Add([]byte(`{"a":"sk-remote-Secret/0123456789"}`))
	f.Add([]byte(`{"a":"` + escapedKey() + `","b":"\"x\\"}`))
	f.Add([]byte(`data: {"a":"sk-remote-Secret\/0123456789"}` + "\n\n"))
	f.Add([]byte(`"unterminated \u0073k-`))
	c, err := New(Config{URL: "http://remote:8000", Key: hostileKey})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := c.scrubBytes(in)
		if strings.Contains(string(out), hostileKey) {
			t.Fatalf("%q kept the key: %q", in, out)
		}
		var v any
		if json.Unmarshal(in, &v) == nil {
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("%q is JSON, its cleaned %q is not: %v", in, out, err)
			}
			b, _ := json.Marshal(v)
			if strings.Contains(string(b), hostileKey) {
				t.Fatalf("%q decodes to the key after cleaning: %q", in, out)
			}
		}
	})
}
