package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/access"
	"github.com/spoolhq/spool/engine/api/responses"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/local"
	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/remotefront"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/status"
	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/engine/turn"
)

// Config configures the server. Zero fields take the defaults.
type Config struct {
	// Host and Port are the listen address (default host 127.0.0.1; port
	// 0 picks a free one). A host that is not loopback requires APIKey.
	Host string
	Port int
	// APIKey, when set, is required on every route but /health, as
	// "Authorization: Bearer KEY" or "x-api-key: KEY".
	APIKey string
	// ModelID is the served model's id (default "spool"). Aliases are
	// accepted too; "spool" always is.
	ModelID string
	Aliases []string
	// AllowedOrigins are CORS origins allowed besides httpguard.DefaultOrigins
	// ("scheme://host:*" matches any port; "*" allows all).
	AllowedOrigins []string
	// AllowedHosts are Host header names accepted besides loopback ones.
	AllowedHosts []string
	// MaxBodyBytes bounds a request body (default 4 MiB).
	MaxBodyBytes int64
	// MaxConnections bounds open connections (default 64). Past it, idle
	// keep-alives are closed to make room, and a few more connections are
	// served /health, the UI and 503s (see engine/httpguard).
	MaxConnections int
	// MaxSubscribers bounds the events websockets (default
	// DefaultMaxSubscribers), apart from MaxConnections: a websocket
	// leaves the connection count once upgraded.
	MaxSubscribers int
	// MaxParsing bounds requests whose bodies are decoded, rendered and
	// tokenized at once (default: the cores, 2 to 4); others wait.
	MaxParsing int
	// ReadHeaderTimeout and ReadTimeout bound reading a request (default
	// 10 s and 60 s); IdleTimeout bounds idle keep-alive connections
	// (default 120 s).
	ReadHeaderTimeout, ReadTimeout, IdleTimeout time.Duration
	// KeepAlive is the interval of SSE keep-alive comments while a
	// stream waits (queue, prefill) (default 10 s).
	KeepAlive time.Duration
	// MaxTokens caps the tokens one request may generate (default: the
	// rest of the context).
	MaxTokens int
	// StoredResponses bounds the /v1/responses kept for
	// previous_response_id (default 128).
	StoredResponses int
	// ShutdownGrace is how long a stopping server lets the generations in
	// flight run before it ends them with an error (default
	// DefaultShutdownGrace; see shutdown.go).
	ShutdownGrace time.Duration
	// Logger receives the access record of every request (AccessMessage),
	// with the cause of every server error, and notes about requests
	// served with adjustments, such as hosted tools left out (default
	// slog.Default()). Client-chosen strings are attribute values, never
	// part of a message.
	Logger *slog.Logger
	// Status is the engine's status board the server's requests report to
	// (default: one of its own).
	Status *status.Board
}

func (c Config) withDefaults() Config {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.ModelID == "" {
		c.ModelID = "spool"
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 4 << 20
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 64
	}
	if c.MaxSubscribers <= 0 {
		c.MaxSubscribers = DefaultMaxSubscribers
	}
	if c.MaxParsing <= 0 {
		c.MaxParsing = httpguard.DefaultParsing()
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = time.Minute
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 2 * time.Minute
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 10 * time.Second
	}
	if c.StoredResponses <= 0 {
		c.StoredResponses = 128
	}
	if c.Status == nil {
		c.Status = status.NewBoard(nil)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	return c
}

// ModelIDFromDir derives a model id from a model directory's name, or,
// for a revision of a hub repository (a Hugging Face cache snapshot,
// models--owner--name/snapshots/<commit>, or a model in Spool's store,
// models--owner--name/<commit>), from the repository's name.
func ModelIDFromDir(dir string) string {
	clean := filepath.Clean(dir)
	name := filepath.Base(clean)
	if name == "." || name == string(filepath.Separator) {
		return "spool"
	}
	parent := filepath.Dir(clean)
	if filepath.Base(parent) == "snapshots" {
		parent = filepath.Dir(parent)
	}
	if repo, ok := strings.CutPrefix(filepath.Base(parent), "models--"); ok && repo != "" {
		if i := strings.LastIndex(repo, "--"); i >= 0 {
			repo = repo[i+2:]
		}
		return repo
	}
	return name
}

// ConstraintCompiler builds the constraint that enforces a response
// format: schema is a JSON Schema, or nil for any JSON object.
type ConstraintCompiler = local.ConstraintCompiler

// GrammarConstraints returns the ConstraintCompiler backed by
// engine/grammar for a tokenizer; eos are the model's end-of-sequence ids.
func GrammarConstraints(tok *tokenizer.Tokenizer, eos []int) (ConstraintCompiler, error) {
	return local.GrammarConstraints(tok, eos)
}

// ExpertTelemetry is what the routed-expert tier reports to the UI: one
// byte per expert (tier << 6 | log2 usage) and a bitmap of the experts hit
// in the current turn.
type ExpertTelemetry interface {
	ExpertMap() []byte
	HitBitmap() []byte
}

// Engine is what the server serves: a running scheduler and the pieces
// that turn text into tokens and back.
type Engine struct {
	Scheduler *scheduler.Scheduler
	Tokenizer *tokenizer.Tokenizer
	// Template renders chat messages; without one the chat endpoints
	// answer 400 and only /v1/completions works.
	Template *chat.Template
	// Constraints enforces response_format json_object / json_schema;
	// without it those formats answer 400.
	Constraints ConstraintCompiler
	// Experts, when set, feeds /stats and the websocket's expert map.
	Experts ExpertTelemetry
	// Extra, when set, adds sections to /stats (memory plan, tiers).
	Extra func() map[string]any
	// Footprint sizes the model in Ollama's listings (zero where unknown).
	Footprint ModelFootprint
	// RenderLimits, when set, replaces chat.DefaultLimits as the base of
	// a render's limits (tests make a render unbounded but for its
	// context).
	RenderLimits chat.Limits
}

// ModelFootprint is what the served model takes: DiskBytes its weight
// files (/api/tags' size), MemoryBytes the memory it is planned to use,
// GPUBytes of it on a GPU (/api/ps' size and size_vram, as Ollama counts
// them: size_vram is part of size).
type ModelFootprint struct {
	DiskBytes, MemoryBytes, GPUBytes int64
}

// Server is the HTTP API. Create it with New.
type Server struct {
	cfg       Config
	eng       Engine
	ids       []string
	created   int64
	hub       *hub
	board     *status.Board
	responses *responses.Store
	handler   http.Handler
	guard     *httpguard.Guard
	// local runs the turns of the served engine; turns and counter are
	// the engine turns run on: the local one, or the remote front.
	local   *local.Engine
	turns   turn.Engine
	counter turn.Counter
	// remote, when set, is the remote engine the server forwards to
	// instead of eng (see NewRemote).
	remote *remote.Client
	// front answers the remote column of the route table (NewRemote).
	front *remotefront.Front
	// log is cfg.Logger; health is what /health reports; stop is the
	// server's stop (shutdown.go).
	log    *slog.Logger
	health *access.Health
	stop   *stopper
}

// New checks the configuration and builds the server.
func New(cfg Config, eng Engine) (*Server, error) {
	cfg = cfg.withDefaults()
	if eng.Scheduler == nil || eng.Tokenizer == nil {
		return nil, errors.New("server: the engine needs a scheduler and a tokenizer")
	}
	s := &Server{
		cfg:       cfg,
		eng:       eng,
		ids:       append([]string{cfg.ModelID, "spool"}, cfg.Aliases...),
		created:   time.Now().Unix(),
		hub:       newHub(),
		board:     cfg.Status,
		responses: responses.NewStore(cfg.StoredResponses),
		log:       cfg.Logger,
		health:    &access.Health{},
		stop:      newStopper(),
	}
	s.board.Serve(cfg.ModelID, nil)
	if err := CheckBind(cfg.Host, cfg.APIKey); err != nil {
		return nil, err
	}
	var err error
	if s.local, err = s.newLocal(); err != nil {
		return nil, err
	}
	s.turns, s.counter = s.local, s.local
	s.guard = s.newGuard()
	s.handler = s.guard.Handler(s.routes())
	return s, nil
}

// newLocal is the local engine of s's engine and configuration.
func (s *Server) newLocal() (*local.Engine, error) {
	e, c := s.eng, s.cfg
	return local.New(local.Config{ModelID: c.ModelID, Scheduler: e.Scheduler, Tokenizer: e.Tokenizer, Template: e.Template,
		Constraints: e.Constraints, MaxTokens: c.MaxTokens, KeepAlive: c.KeepAlive, Observer: observer{s}, RenderLimits: e.RenderLimits})
}

// CheckBind refuses a non-loopback listen address without an API key.
func CheckBind(host, apiKey string) error { return httpguard.CheckBind(host, apiKey) }

// newGuard builds the transport guard of s's configuration.
func (s *Server) newGuard() *httpguard.Guard {
	c := s.cfg
	return httpguard.New(httpguard.Config{
		Host: c.Host, APIKey: c.APIKey, AllowedOrigins: c.AllowedOrigins, AllowedHosts: c.AllowedHosts,
		MaxBodyBytes: c.MaxBodyBytes, MaxConnections: c.MaxConnections, MaxParsing: c.MaxParsing,
		EventsPath: eventsPath, Conversation: s.conversation, WriteError: writeError,
	})
}

// Turns is the engine the server's turns run on (engine/turn): the local
// engine (a *local.Engine), or the remote front of a server built with
// NewRemote; either is also a turn.Counter.
func (s *Server) Turns() turn.Engine { return s.turns }

// Handler returns the HTTP handler with every route and guard, which logs
// an access record for every request (AccessMessage).
func (s *Server) Handler() http.Handler { return access.Handler(s.log, s.health, s.handler) }

// AccessMessage is the message of the access record logged when a
// request ends (engine/access).
const AccessMessage = access.Message

// Addr is the configured listen address.
func (s *Server) Addr() string { return net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port)) }

// Listen opens the configured address.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.Addr())
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return ln, nil
}

// Serve answers requests on ln until ctx ends, then stops (shutdown.go):
// it takes no new generation, refuses the queued ones, lets the running
// ones go on for Config.ShutdownGrace and ends the rest with an error a
// client can act on (503 with Retry-After, or a stream's error event).
// The engine must keep running until Serve returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Request contexts end with their client, not with ctx: a stop is
	// the server's to tell the client about.
	base := context.WithoutCancel(ctx)
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	hubCtx, stopHub := context.WithCancel(ctx)
	defer stopHub()
	go s.hub.run(hubCtx, s)
	if s.remote != nil {
		go s.followRemote(hubCtx)
	}
	errc := make(chan error, 1)
	guarded := s.guard.Serve(srv, ln)
	go func() { errc <- srv.Serve(guarded) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.shutdown(srv)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Publish sends an event to every websocket client (for example download
// progress: Event{Type: "download", Data: ...}).
func (s *Server) Publish(ev Event) { s.hub.publish(ev) }

// endpoint is one route of the API. Both modes serve the one table:
// local runs the served engine's handler, remote the handler that
// forwards to a remote engine (see NewRemote); an endpoint without a
// handler for a mode is not served in it.
type endpoint struct {
	pattern string
	// conversation is the top-level field that holds the request's
	// conversation, pre-scanned against the context before the body is
	// decoded ("" for none).
	conversation  string
	local, remote func(*Server, http.ResponseWriter, *http.Request)
}

// endpoints is the route table: a new endpoint is added here.
var endpoints = []endpoint{
	{pattern: "GET /health", local: (*Server).handleHealth, remote: (*Server).handleHealth},
	{pattern: "GET /stats", local: (*Server).handleStats, remote: viaFront((*remotefront.Front).Stats)},
	{pattern: "GET " + eventsPath, local: (*Server).handleEventsRoute, remote: (*Server).handleEventsRoute},
	{pattern: "GET /v1/models", local: (*Server).handleModels, remote: viaFront((*remotefront.Front).Models)},
	{pattern: "GET /v1/models/{id...}", local: (*Server).handleModel, remote: viaFront((*remotefront.Front).Model)},
	{pattern: "POST /v1/chat/completions", conversation: "messages", local: (*Server).handleChat, remote: viaFront((*remotefront.Front).Proxy)},
	{pattern: "POST /v1/completions", local: (*Server).handleCompletions, remote: viaFront((*remotefront.Front).Proxy)},
	{pattern: "POST /v1/messages", conversation: "messages", local: (*Server).handleMessages, remote: (*Server).handleMessages},
	{pattern: "POST /v1/messages/count_tokens", conversation: "messages", local: (*Server).handleCountTokens, remote: (*Server).handleCountTokens},
	{pattern: "POST /v1/responses", conversation: "input", local: (*Server).handleResponses, remote: viaFront((*remotefront.Front).Proxy)},
	{pattern: "GET /v1/responses", local: (*Server).handleResponsesSocket},
	{pattern: "GET /v1/responses/{id}", local: (*Server).handleGetResponse, remote: viaFront((*remotefront.Front).Get)},
	{pattern: "POST /v1/embeddings", local: (*Server).handleEmbeddings, remote: viaFront((*remotefront.Front).Proxy)},
	// Ollama's API (ollama*.go).
	{pattern: "GET /api/version", local: (*Server).handleOllamaVersion},
	{pattern: "GET /api/tags", local: (*Server).handleOllamaTags},
	{pattern: "POST /api/show", local: (*Server).handleOllamaShow},
	{pattern: "GET /api/ps", local: (*Server).handleOllamaPS},
	{pattern: "POST /api/chat", conversation: "messages", local: (*Server).handleOllamaChat},
	{pattern: "POST /api/generate", local: (*Server).handleOllamaGenerate},
	{pattern: "POST /api/embed", local: (*Server).handleOllamaEmbed},
	{pattern: "POST /api/embeddings", local: (*Server).handleOllamaEmbeddings},
	{pattern: "POST /api/pull", local: (*Server).handleOllamaPull},
	{pattern: "/", local: (*Server).handleFallback, remote: (*Server).handleFallback},
}

// viaFront is a remote-mode handler of the route table: h of the
// server's remote front.
func viaFront(h func(*remotefront.Front, http.ResponseWriter, *http.Request)) func(*Server, http.ResponseWriter, *http.Request) {
	return func(s *Server, w http.ResponseWriter, r *http.Request) { h(s.front, w, r) }
}

// routes is the route table's mux for s's mode.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, e := range endpoints {
		h := e.local
		if s.remote != nil {
			h = e.remote
		}
		if h == nil {
			continue // not served in this mode: the fallback answers 404
		}
		if s.remote != nil && strings.HasPrefix(e.pattern, "POST ") {
			h = withStop(h) // the local engine's turns are the stopper's already
		}
		mux.HandleFunc(e.pattern, func(w http.ResponseWriter, r *http.Request) {
			if e.pattern != "/" { // the fallback's requests are logged by their path
				access.From(r.Context()).SetEndpoint(e.pattern)
			}
			h(s, w, r)
		})
	}
	return mux
}

// conversation is the guard's pre-scan rule: the field of a POST to path
// that holds its conversation, and the context it must fit. A server
// forwarding to a remote engine does not know the remote's context.
func (s *Server) conversation(path string) (key string, limit int, ok bool) {
	if s.eng.Scheduler == nil {
		return "", 0, false
	}
	for _, e := range endpoints {
		if e.conversation != "" && e.pattern == "POST "+path {
			return e.conversation, s.eng.Scheduler.Config().ContextLength, true
		}
	}
	return "", 0, false
}

// handleEventsRoute upgrades a websocket request to the events stream and
// tells any other request what the route is.
func (s *Server) handleEventsRoute(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		w.Header().Set("Upgrade", "websocket")
		writeError(w, r, &apiwire.Error{Status: http.StatusUpgradeRequired, Type: "invalid_request_error", Code: "websocket_required",
			Message: eventsPath + " is a websocket of live engine events: connect with a websocket client (Upgrade: websocket)"})
		return
	}
	s.handleEvents(w, r)
}

// handleFallback answers "/" and unknown routes.
func (s *Server) handleFallback(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("Spool is running\n"))
		return
	}
	writeError(w, r, apiwire.NotFound("unknown_route", "no route for %s %s", r.Method, r.URL.Path))
}

// checkModel accepts the served ids; /v1/messages also maps Claude model
// names (Claude Code sends them) to the served model.
func (s *Server) checkModel(id string, anthropic bool) error {
	if id == "" {
		return nil
	}
	id = strings.TrimSuffix(id, ":latest") // Ollama's default tag
	for _, ok := range s.ids {
		if id == ok {
			return nil
		}
	}
	if anthropic && strings.HasPrefix(id, "claude-") {
		return nil
	}
	return apiwire.NotFound("model_not_found", "the model %q does not exist; this server serves %q", id, s.cfg.ModelID)
}
