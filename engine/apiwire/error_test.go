package apiwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestEnvelopes(t *testing.T) {
	tests := []struct {
		err                       *Error
		openAI, anthropic, ollama string
	}{
		{
			err:       Invalid("max_tokens", "max_tokens must be at least 1, got %d", 0),
			openAI:    `{"error":{"message":"max_tokens must be at least 1, got 0","type":"invalid_request_error","param":"max_tokens","code":null}}`,
			anthropic: `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens must be at least 1, got 0"}}`,
			ollama:    `{"error":"max_tokens must be at least 1, got 0"}`,
		},
		{
			err:       Invalid("stream", "must be a boolean"),
			openAI:    `{"error":{"message":"must be a boolean","type":"invalid_request_error","param":"stream","code":null}}`,
			anthropic: `{"type":"error","error":{"type":"invalid_request_error","message":"stream: must be a boolean"}}`,
			ollama:    `{"error":"stream: must be a boolean"}`,
		},
		{
			err:       NotFound("model_not_found", "the model %q does not exist", "x"),
			openAI:    `{"error":{"message":"the model \"x\" does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			anthropic: `{"type":"error","error":{"type":"not_found_error","message":"the model \"x\" does not exist"}}`,
			ollama:    `{"error":"the model \"x\" does not exist"}`,
		},
		{
			err:       Forbidden("host %q is not allowed", "evil.example"),
			openAI:    `{"error":{"message":"host \"evil.example\" is not allowed","type":"permission_error","param":null,"code":"forbidden"}}`,
			anthropic: `{"type":"error","error":{"type":"permission_error","message":"host \"evil.example\" is not allowed"}}`,
			ollama:    `{"error":"host \"evil.example\" is not allowed"}`,
		},
		{
			err:       TooManyMessages(300, 256),
			openAI:    `{"error":{"message":"this model's context length is 256 tokens, but the request has 300 messages (each takes at least one token)","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			anthropic: `{"type":"error","error":{"type":"invalid_request_error","message":"this model's context length is 256 tokens, but the request has 300 messages (each takes at least one token)"}}`,
			ollama:    `{"error":"this model's context length is 256 tokens, but the request has 300 messages (each takes at least one token)"}`,
		},
		{
			err:       Unavailable("the engine is %s", "stopping"),
			openAI:    `{"error":{"message":"the engine is stopping","type":"server_error","param":null,"code":"unavailable"}}`,
			anthropic: `{"type":"error","error":{"type":"overloaded_error","message":"the engine is stopping"}}`,
			ollama:    `{"error":"the engine is stopping"}`,
		},
		{
			err:       &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable", Message: "busy"},
			openAI:    `{"error":{"message":"busy","type":"server_error","param":null,"code":"unavailable"}}`,
			anthropic: `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`,
			ollama:    `{"error":"busy"}`,
		},
	}
	for _, tt := range tests {
		for _, c := range []struct {
			name string
			v    any
			want string
		}{{"openai", tt.err.OpenAI(), tt.openAI}, {"anthropic", tt.err.Anthropic(), tt.anthropic}, {"ollama", tt.err.Ollama(), tt.ollama}} {
			got, err := json.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("%s envelope of %q:\n got %s\nwant %s", c.name, tt.err.Message, got, c.want)
			}
		}
	}
	if got := Unavailable("busy"); got.RetryAfter != 1 {
		t.Errorf("Unavailable's Retry-After = %d, want 1", got.RetryAfter)
	}
	// An internal error keeps its cause for the log and tells the client
	// only what the cause's chain says is fit for it.
	cause := &fs.PathError{Op: "read", Path: "/Users/bob/models/glm/out-00001.safetensors", Err: io.ErrUnexpectedEOF}
	if got := Internal(fmt.Errorf("layer 3: %w", cause)); got.Status != http.StatusInternalServerError || got.Code != "internal_error" ||
		strings.Contains(got.Message, "/Users") || strings.Contains(got.Message, "unexpected EOF") || !errors.Is(got, io.ErrUnexpectedEOF) {
		t.Errorf("Internal = %+v", got)
	}
	public := fmt.Errorf("reading %s: %w", cause.Path, Public("expert 12 of layer 3 failed its checksum"))
	if got := Internal(public); !strings.HasSuffix(got.Message, ": expert 12 of layer 3 failed its checksum") || strings.Contains(got.Message, "/Users") {
		t.Errorf("Internal of a public cause = %q", got.Message)
	}
}

func TestBodyError(t *testing.T) {
	if e := BodyError(fmt.Errorf("reading: %w", &http.MaxBytesError{Limit: 64})); e.Status != http.StatusRequestEntityTooLarge || e.Code != "request_too_large" || e.Message != "the request body is larger than 64 bytes" {
		t.Errorf("BodyError of a body over the limit = %+v", e)
	}
	if e := BodyError(errString("connection reset")); e.Status != http.StatusBadRequest || e.Code != "" || e.Message != "reading the request body: connection reset" {
		t.Errorf("BodyError of a failed read = %+v", e)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestWriteJSON(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteJSON(rec, http.StatusTeapot, map[string]int{"n": 1})
	if rec.Code != http.StatusTeapot || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != "{\"n\":1}\n" || rec.Header().Get("Content-Length") != "8" {
		t.Errorf("WriteJSON: %d %q %q", rec.Code, rec.Header(), rec.Body.String())
	}
	rec = httptest.NewRecorder()
	WriteJSON(rec, http.StatusOK, func() {})
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("WriteJSON of an unencodable value: status %d, want 500", rec.Code)
	}
}

func TestSSE(t *testing.T) {
	rec := httptest.NewRecorder()
	s, err := StartSSE(rec)
	if err != nil {
		t.Fatal(err)
	}
	s.Data(map[string]int{"a": 1})
	s.Event("ping", map[string]string{"type": "ping"})
	s.Done()
	want := "data: {\"a\":1}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\ndata: [DONE]\n\n"
	if rec.Body.String() != want || rec.Header().Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Errorf("stream %q (%q), want %q", rec.Body.String(), rec.Header().Get("Content-Type"), want)
	}
	if err := s.Data(func() {}); err == nil {
		t.Error("Data of an unencodable value: no error")
	}
}

func TestWriteErrorEnvelopeByPath(t *testing.T) {
	e := &Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "queue_full", Message: "busy", RetryAfter: 2}
	for _, tt := range []struct{ path, want string }{
		{"/v1/chat/completions", `{"error":{"message":"busy","type":"rate_limit_error","param":null,"code":"queue_full"}}`},
		{"/v1/messages", `{"type":"error","error":{"type":"rate_limit_error","message":"busy"}}`},
		{"/v1/messages/count_tokens", `{"type":"error","error":{"type":"rate_limit_error","message":"busy"}}`},
		{"/v1/messagesx", `{"error":{"message":"busy","type":"rate_limit_error","param":null,"code":"queue_full"}}`},
		{"/api/chat", `{"error":"busy"}`},
	} {
		rec := httptest.NewRecorder()
		WriteError(rec, tt.path, e)
		if got := rec.Body.String(); got != tt.want+"\n" || rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "2" {
			t.Errorf("%s: %d Retry-After %q %s, want 429 Retry-After 2 %s", tt.path, rec.Code, rec.Header().Get("Retry-After"), got, tt.want)
		}
	}
}
