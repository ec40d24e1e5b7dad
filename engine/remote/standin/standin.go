package standin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a stand-in.
type Options struct {
	// Model is the served name (default "glm-5.2-fp8"); Root the
	// checkpoint (default "zai-org/GLM-5.2-FP8").
	Model, Root string
	// MaxModelLen is the context in tokens (default 131072).
	MaxModelLen int
	// Key, when set, is required as "Authorization: Bearer KEY" on /v1/.
	Key string
	// ChunkDelay is the pause between streamed chunks.
	ChunkDelay time.Duration
}

// Request is one request the stand-in received.
type Request struct {
	Method string         `json:"method"`
	Path   string         `json:"path"`
	Header http.Header    `json:"header"`
	Body   map[string]any `json:"body"`
}

// Server is the stand-in. Use it as an http.Handler.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu        sync.Mutex
	requests  []Request
	active    int
	cancelled int
	responses map[string]map[string]any
}

// New returns a stand-in.
func New(o Options) *Server {
	if o.Model == "" {
		o.Model = "glm-5.2-fp8"
	}
	if o.Root == "" {
		o.Root = "zai-org/GLM-5.2-FP8"
	}
	if o.MaxModelLen <= 0 {
		o.MaxModelLen = 131072
	}
	s := &Server{opts: o, responses: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	mux.HandleFunc("POST /v1/responses", s.handleResponses)
	mux.HandleFunc("GET /v1/responses/{id}", s.handleGetResponse)
	mux.HandleFunc("POST /tokenize", s.handleTokenize)
	mux.HandleFunc("GET /standin/stats", s.handleStats)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
	})
	s.mux = mux
	return s
}

// Model is the served name.
func (s *Server) Model() string { return s.opts.Model }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Key != "" && strings.HasPrefix(r.URL.Path, "/v1/") && r.Header.Get("Authorization") != "Bearer "+s.opts.Key {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "Unauthorized"})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Requests returns the requests received so far (but /standin/stats).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request{}, s.requests...)
}

// Last returns the last request to path.
func (s *Server) Last(path string) (Request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.requests) - 1; i >= 0; i-- {
		if s.requests[i].Path == path {
			return s.requests[i], true
		}
	}
	return Request{}, false
}

// Cancelled counts generations whose client left before their end; Active
// counts generations under way.
func (s *Server) Cancelled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled
}

// Active counts generations under way.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	out := map[string]any{"requests": len(s.requests), "active": s.active, "cancelled": s.cancelled}
	if n := len(s.requests); n > 0 {
		out["last"] = s.requests[n-1]
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// record decodes and keeps a request; it answers 400 for a body that is
// not a JSON object.
func (s *Server) record(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	body := map[string]any{}
	if r.Method == http.MethodPost {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			vllmError(w, http.StatusBadRequest, "BadRequestError", "the body is not a JSON object: "+err.Error())
			return nil, false
		}
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()
	return body, true
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	s.record(w, r)
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{map[string]any{
		"id": s.opts.Model, "object": "model", "created": 1750000000, "owned_by": "vllm",
		"root": s.opts.Root, "parent": nil, "max_model_len": s.opts.MaxModelLen,
		"permission": []any{map[string]any{"id": "modelperm-standin", "object": "model_permission", "allow_sampling": true}},
	}}})
}

// vllmError answers in vLLM's error shape.
func vllmError(w http.ResponseWriter, status int, typ, msg string) {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "2")
	}
	writeJSON(w, status, map[string]any{"object": "error", "message": msg, "type": typ, "param": nil, "code": status})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}

// script is what a request's directives ask for.
type script struct {
	text        string // the text without directives
	status      int
	sleep       time.Duration
	stall, cut  bool
	streamError bool
	think       bool
	twoTools    bool
	comments    bool
}

var directive = regexp.MustCompile(`\[\[([a-z-]+)(?: ([^\]]+))?\]\]`)

func parseScript(text string) script {
	sc := script{}
	for _, m := range directive.FindAllStringSubmatch(text, -1) {
		switch m[1] {
		case "status":
			sc.status, _ = strconv.Atoi(m[2])
		case "sleep":
			sc.sleep, _ = time.ParseDuration(m[2])
		case "stall":
			sc.stall = true
		case "cut":
			sc.cut = true
		case "stream-error":
			sc.streamError = true
		case "think":
			sc.think = true
		case "two-tools":
			sc.twoTools = true
		case "comments":
			sc.comments = true
		}
	}
	sc.text = strings.Join(strings.Fields(directive.ReplaceAllString(text, "")), " ")
	return sc
}

// prelude applies the status and sleep directives and the model check;
// false means it answered (or the client left).
func (s *Server) prelude(w http.ResponseWriter, r *http.Request, body map[string]any, sc script) bool {
	if m, _ := body["model"].(string); m != "" && m != s.opts.Model {
		vllmError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", m))
		return false
	}
	if sc.sleep > 0 {
		select {
		case <-time.After(sc.sleep):
		case <-r.Context().Done():
			s.mu.Lock()
			s.cancelled++
			s.mu.Unlock()
			return false
		}
	}
	if sc.status != 0 {
		typ := map[int]string{400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError", 503: "ServiceUnavailableError"}[sc.status]
		if typ == "" {
			typ = "InternalServerError"
		}
		vllmError(w, sc.status, typ, fmt.Sprintf("stand-in error %d", sc.status))
		return false
	}
	return true
}

// wordCount is the stand-in's token count of a text.
func wordCount(s string) int { return len(strings.Fields(s)) }

func newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// generation follows one answer for the cancellation counts.
func (s *Server) begin() func(ctx context.Context, complete bool) {
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
	return func(ctx context.Context, complete bool) {
		s.mu.Lock()
		s.active--
		if !complete && ctx.Err() != nil {
			s.cancelled++
		}
		s.mu.Unlock()
	}
}

// pause waits between chunks; false when the client left.
func (s *Server) pause(ctx context.Context) bool {
	if s.opts.ChunkDelay <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-time.After(s.opts.ChunkDelay):
		return true
	case <-ctx.Done():
		return false
	}
}

// sse writes server-sent events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
	// comments sends blocks without data before every data event
	// (the [[comments]] directive).
	comments bool
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	s := &sse{w: w, f: f}
	s.flush()
	return s
}

func (s *sse) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *sse) data(v any) {
	b, _ := json.Marshal(v)
	if s.comments {
		// Legal SSE that dispatches nothing to a spec client: a comment
		// and an event without data, each ended by a blank line.
		fmt.Fprint(s.w, ": keep-alive\n\nevent: ping\n\n")
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.flush()
}

func (s *sse) event(name string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	s.flush()
}

func (s *sse) done() {
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	s.flush()
}

// stallUntilGone waits for the client to leave.
func stallUntilGone(ctx context.Context) { <-ctx.Done() }

// cutConnection breaks the connection without ending the stream.
func cutConnection() { panic(http.ErrAbortHandler) }
