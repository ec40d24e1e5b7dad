package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/scheduler"
)

// ollamaChatRequest is an /api/chat request.
type ollamaChatRequest struct {
	Model     string          `json:"model"`
	Messages  []ollamaMessage `json:"messages"`
	Stream    *bool           `json:"stream"`
	Format    json.RawMessage `json:"format"`
	Options   json.RawMessage `json:"options"`
	Tools     []chat.Tool     `json:"tools"`
	Think     json.RawMessage `json:"think"`
	KeepAlive json.RawMessage `json:"keep_alive"`
}

// ollamaGenerateRequest is an /api/generate request.
type ollamaGenerateRequest struct {
	Model     string          `json:"model"`
	Prompt    string          `json:"prompt"`
	Suffix    string          `json:"suffix"`
	System    string          `json:"system"`
	Template  string          `json:"template"`
	Context   []int           `json:"context"`
	Stream    *bool           `json:"stream"`
	Raw       bool            `json:"raw"`
	Format    json.RawMessage `json:"format"`
	Images    []string        `json:"images"`
	Options   json.RawMessage `json:"options"`
	Think     json.RawMessage `json:"think"`
	KeepAlive json.RawMessage `json:"keep_alive"`
}

// ollamaMessage is one message of /api/chat, in and out.
type ollamaMessage struct {
	Role       string           `json:"role"`
	Content    string           `json:"content"`
	Thinking   string           `json:"thinking,omitempty"`
	Images     []string         `json:"images,omitempty"`
	ToolCalls  []ollamaToolCall `json:"tool_calls,omitempty"`
	ToolName   string           `json:"tool_name,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

// ollamaToolCall is a tool call: arguments are a JSON object (Ollama's
// form); a string holding one is accepted too.
type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaMessages translates the conversation into chat messages.
func ollamaMessages(msgs []ollamaMessage) ([]chat.Message, error) {
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		if len(m.Images) > 0 {
			return nil, invalid(fmt.Sprintf("messages[%d].images", i), "message %d has images: this model reads text only", i)
		}
		cm := chat.Message{Role: m.Role, Content: m.Content, ReasoningContent: m.Thinking, ToolCallID: m.ToolCallID, Name: m.ToolName}
		for j, c := range m.ToolCalls {
			param := fmt.Sprintf("messages[%d].tool_calls[%d].function", i, j)
			if c.Function.Name == "" {
				return nil, invalid(param+".name", "tool call %d of message %d has no function name", j, i)
			}
			args, err := ollamaArguments(param+".arguments", c.Function.Arguments)
			if err != nil {
				return nil, err
			}
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: c.ID, Type: "function", Function: chat.FunctionCall{Name: c.Function.Name, Arguments: args}})
		}
		out[i] = cm
	}
	return out, nil
}

// ollamaArguments reads a tool call's arguments: an object, a string
// holding one, or nothing (no arguments).
func ollamaArguments(param string, raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return json.RawMessage("{}"), nil
	case raw[0] == '{':
		return json.RawMessage(raw), nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || !json.Valid([]byte(s)) {
			return nil, invalid(param, "%s must be a JSON object", param)
		}
		return s, nil
	}
	return nil, invalid(param, "%s must be a JSON object", param)
}

// ollamaThink reads "think": true, false, or "low", "medium", "high".
func ollamaThink(raw json.RawMessage) (*bool, map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return &b, nil, nil
	}
	var level string
	if err := json.Unmarshal(raw, &level); err == nil {
		switch level {
		case "low", "medium", "high":
			return new(true), map[string]any{"reasoning_effort": level}, nil
		}
	}
	return nil, nil, invalid("think", `think must be true, false, "low", "medium" or "high"`)
}

// ollamaKeepAlive validates keep_alive (a duration such as "5m", a number
// of seconds, negative for ever); Spool's model is pinned, so it changes
// nothing.
func ollamaKeepAlive(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err == nil {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if _, err := time.ParseDuration(s); err == nil {
			return nil
		}
		var n float64
		if _, err := fmt.Sscanf(s, "%g", &n); err == nil && fmt.Sprint(n) == s {
			return nil
		}
	}
	return invalid("keep_alive", `keep_alive must be a duration such as "5m" or a number of seconds, got %s`, raw)
}

// ollamaFormat compiles "format": "json" (any JSON object) or a JSON
// Schema object, through the grammar like response_format.
func (s *Server) ollamaFormat(raw json.RawMessage, t *turn) (bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte(`""`)) {
		return false, nil
	}
	var f responseFormat
	switch {
	case bytes.Equal(raw, []byte(`"json"`)):
		f.Type = "json_object"
	case raw[0] == '{':
		f.Type = "json_schema"
		f.JSONSchema = &struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		}{Name: "format", Schema: raw}
	default:
		return false, invalid("format", `format must be "json" or a JSON Schema object, got %s`, raw)
	}
	return s.constraint("format", &f, t)
}

// ollamaCommon is what chat and generate share: the parsed options and
// the request's start, for the timings.
type ollamaCommon struct {
	start  time.Time
	opts   ollamaOptions
	stream bool
}

// ollamaBegin reads the fields chat and generate share into c and
// returns the thinking switch and template variables of "think".
func (s *Server) ollamaBegin(ctx context.Context, c *ollamaCommon, model string, stream *bool, options, think, keepAlive json.RawMessage) (*bool, map[string]any, error) {
	if err := s.ollamaModelName(model); err != nil {
		return nil, nil, err
	}
	if err := ollamaKeepAlive(keepAlive); err != nil {
		return nil, nil, err
	}
	opts, err := parseOllamaOptions(options)
	if err != nil {
		return nil, nil, err
	}
	if len(opts.ignored) > 0 {
		s.noteDropped(ctx, "Ollama options", opts.ignored)
	}
	c.opts, c.stream = opts, stream == nil || *stream
	return ollamaThink(think)
}

// ollamaLimits applies the options that bound a turn once its prompt is
// known: num_ctx and num_predict.
func (s *Server) ollamaLimits(c *ollamaCommon, t *turn) error {
	if err := s.applySampling(c.opts.sampling, &t.req); err != nil {
		return err
	}
	t.stops = c.opts.stop
	var limit *int
	if c.opts.numPredict != nil && *c.opts.numPredict > 0 {
		limit = c.opts.numPredict
	}
	var err error
	if t.req.MaxTokens, err = s.maxTokens("options.num_predict", limit, len(t.prompt)); err != nil {
		return err
	}
	if n := c.opts.numCtx; n != nil && *n < s.eng.Scheduler.Config().ContextLength {
		if len(t.prompt) >= *n {
			e := contextLength(*n, "the prompt has %d tokens (options.num_ctx)", len(t.prompt))
			e.Param = "options.num_ctx"
			return e
		}
		t.req.MaxTokens = min(t.req.MaxTokens, *n-len(t.prompt))
	}
	s.finishTurn(t)
	return nil
}

// ollamaChatTurn validates an /api/chat request and prepares its turn;
// nil without an error is a load request (no messages).
func (s *Server) ollamaChatTurn(ctx context.Context, req *ollamaChatRequest, c *ollamaCommon) (*turn, error) {
	thinking, extra, err := s.ollamaBegin(ctx, c, req.Model, req.Stream, req.Options, req.Think, req.KeepAlive)
	if err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 {
		return nil, nil
	}
	// Roles are not checked: Ollama hands every message to the model's
	// template, which renders a role it does not know as it will (GLM's:
	// as nothing), and clients depend on it (mods sends its last answer
	// back with an empty role).
	msgs, err := ollamaMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	if err := checkTools("tools", req.Tools); err != nil {
		return nil, err
	}
	t := &turn{id: newID("ollama-")}
	constrained, err := s.ollamaFormat(req.Format, t)
	if err != nil {
		return nil, err
	}
	in := chatInput{messages: msgs, tools: req.Tools, choice: toolChoice{mode: "auto"}, thinking: thinking, extra: extra, constrained: constrained, ctx: ctx}
	if err := s.renderChat(in, t); err != nil {
		return nil, err
	}
	return t, s.ollamaLimits(c, t)
}

// ollamaGenerateTurn validates an /api/generate request and prepares its
// turn: the prompt (with system) through the chat template, or as it is
// with raw; nil without an error is a load request (no prompt).
func (s *Server) ollamaGenerateTurn(ctx context.Context, req *ollamaGenerateRequest, c *ollamaCommon) (*turn, error) {
	thinking, extra, err := s.ollamaBegin(ctx, c, req.Model, req.Stream, req.Options, req.Think, req.KeepAlive)
	if err != nil {
		return nil, err
	}
	switch {
	case req.Suffix != "":
		return nil, invalid("suffix", "suffix (fill-in-the-middle) is not supported by this model")
	case req.Template != "":
		return nil, invalid("template", "a template override is not supported: Spool renders the model's own chat template (or use raw)")
	case len(req.Images) > 0:
		return nil, invalid("images", "images are not supported: this model reads text only")
	}
	if req.Prompt == "" && len(req.Context) == 0 {
		return nil, nil
	}
	vocab := s.eng.Scheduler.Model().Config().VocabSize
	for _, id := range req.Context {
		if id < 0 || id >= vocab {
			return nil, invalid("context", "context token id %d is outside the vocabulary (0..%d)", id, vocab-1)
		}
	}
	t := &turn{id: newID("ollama-")}
	constrained, err := s.ollamaFormat(req.Format, t)
	if err != nil {
		return nil, err
	}
	if req.Raw {
		t.prompt = s.eng.Tokenizer.Encode(req.Prompt)
	} else {
		var msgs []chat.Message
		if req.System != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: req.System})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: req.Prompt})
		in := chatInput{messages: msgs, choice: toolChoice{mode: "none"}, thinking: thinking, extra: extra, constrained: constrained, ctx: ctx}
		if err := s.renderChat(in, t); err != nil {
			return nil, err
		}
	}
	t.prompt = append(append([]int{}, req.Context...), t.prompt...)
	return t, s.ollamaLimits(c, t)
}

// ollamaStats are the timing fields of a final answer, in nanoseconds.
type ollamaStats struct {
	DoneReason         string `json:"done_reason,omitempty"`
	TotalDuration      int64  `json:"total_duration,omitempty"`
	LoadDuration       int64  `json:"load_duration,omitempty"`
	PromptEvalCount    int    `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64  `json:"prompt_eval_duration,omitempty"`
	EvalCount          int    `json:"eval_count,omitempty"`
	EvalDuration       int64  `json:"eval_duration,omitempty"`
}

// ollamaStatsOf are a finished turn's timings; load_duration is the time
// before the engine started on it (see ollama.go).
func ollamaStatsOf(c *ollamaCommon, t *turn, o *outcome) ollamaStats {
	st := ollamaStats{DoneReason: o.finish, TotalDuration: max(time.Since(c.start).Nanoseconds(), 1),
		PromptEvalCount: len(t.prompt), EvalCount: o.completion}
	if st.DoneReason == "tool_calls" {
		st.DoneReason = "stop"
	}
	if r := o.res; r != nil {
		st.PromptEvalDuration = r.PrefillTime.Nanoseconds()
		st.EvalDuration = r.DecodeTime.Nanoseconds()
		st.LoadDuration = max(st.TotalDuration-st.PromptEvalDuration-st.EvalDuration, 0)
	}
	return st
}

// ollamaChatChunk is an /api/chat answer or stream line.
type ollamaChatChunk struct {
	Model     string        `json:"model"`
	CreatedAt string        `json:"created_at"`
	Message   ollamaMessage `json:"message"`
	Done      bool          `json:"done"`
	ollamaStats
}

// ollamaGenerateChunk is an /api/generate answer or stream line.
type ollamaGenerateChunk struct {
	Model     string `json:"model"`
	CreatedAt string `json:"created_at"`
	Response  string `json:"response"`
	Thinking  string `json:"thinking,omitempty"`
	Done      bool   `json:"done"`
	ollamaStats
	Context []int `json:"context,omitempty"`
}

// ollamaCalls renders tool calls in Ollama's shape (arguments an object).
func ollamaCalls(calls []chat.ToolCall, first int) []ollamaToolCall {
	out := make([]ollamaToolCall, len(calls))
	for i, c := range calls {
		out[i].ID = c.ID
		out[i].Function.Index = first + i
		out[i].Function.Name = c.Function.Name
		args, _ := c.Function.Arguments.(string)
		if json.Valid([]byte(args)) {
			out[i].Function.Arguments = json.RawMessage(args)
		} else {
			out[i].Function.Arguments, _ = json.Marshal(args)
		}
	}
	return out
}

func (s *Server) handleOllamaChat(w http.ResponseWriter, r *http.Request) {
	var req ollamaChatRequest
	c, t, ok := ollamaTurn(s, w, r, &req, s.ollamaChatTurn)
	if ok {
		s.ollamaChatReply(w, r, c, req.Model, t)
	}
}

// ollamaChatReply runs a prepared /api/chat turn (nil: a load request) and
// answers it, streamed or whole as c says.
func (s *Server) ollamaChatReply(w http.ResponseWriter, r *http.Request, c *ollamaCommon, model string, t *turn) {
	nCalls := 0 // the calls answered so far: a call's index goes on from them
	ollamaAnswer(s, w, r, c, t, ollamaShape[ollamaChatChunk]{
		chunk: func(p piece, done bool) ollamaChatChunk {
			m := ollamaMessage{Role: "assistant", Content: p.content, Thinking: p.reasoning, ToolCalls: ollamaCalls(p.calls, nCalls)}
			nCalls += len(p.calls)
			return ollamaChatChunk{Model: model, CreatedAt: ollamaTime(time.Now()), Message: m, Done: done}
		},
		stats: func(last *ollamaChatChunk, st ollamaStats, _ []scheduler.Token) { last.ollamaStats = st },
	})
}

func (s *Server) handleOllamaGenerate(w http.ResponseWriter, r *http.Request) {
	var req ollamaGenerateRequest
	c, t, ok := ollamaTurn(s, w, r, &req, s.ollamaGenerateTurn)
	if !ok {
		return
	}
	ollamaAnswer(s, w, r, c, t, ollamaShape[ollamaGenerateChunk]{
		chunk: func(p piece, done bool) ollamaGenerateChunk {
			return ollamaGenerateChunk{Model: req.Model, CreatedAt: ollamaTime(time.Now()), Response: p.content, Thinking: p.reasoning, Done: done}
		},
		stats: func(last *ollamaGenerateChunk, st ollamaStats, tokens []scheduler.Token) {
			last.ollamaStats = st
			if t != nil && !req.Raw {
				last.Context = append(append([]int{}, t.prompt...), tokenIDs(tokens)...)
			}
		},
	})
}

// ollamaTurn decodes an Ollama request into req and prepares its turn
// with build (nil without an error: a load request); ok is false when it
// has answered an error.
func ollamaTurn[R any](s *Server, w http.ResponseWriter, r *http.Request, req *R, build func(context.Context, *R, *ollamaCommon) (*turn, error)) (*ollamaCommon, *turn, bool) {
	c := &ollamaCommon{start: time.Now()}
	if err := decodeBody(r, req); err != nil {
		writeError(w, r, err)
		return nil, nil, false
	}
	t, err := build(r.Context(), req, c)
	if err != nil {
		writeError(w, r, err)
		return nil, nil, false
	}
	return c, t, true
}

// ollamaShape is how an Ollama endpoint words its answer; C is its chunk
// (the whole answer, or a stream line).
type ollamaShape[C any] struct {
	// chunk is the chunk of a piece of the reply (the whole reply when
	// not streamed, nothing for a keep-alive or the streamed last line);
	// done marks the last chunk.
	chunk func(p piece, done bool) C
	// stats stamps the last chunk with the turn's stats; tokens are the
	// reply's (none for a load request).
	stats func(last *C, st ollamaStats, tokens []scheduler.Token)
}

// ollamaAnswer runs a prepared Ollama turn (nil: a load request, answered
// done with done_reason "load") and answers it in sh's chunks: whole, or
// streamed as NDJSON lines as c says.
func ollamaAnswer[C any](s *Server, w http.ResponseWriter, r *http.Request, c *ollamaCommon, t *turn, sh ollamaShape[C]) {
	if t == nil {
		httpguard.EndParsing(r.Context())
		last := sh.chunk(piece{}, true)
		sh.stats(&last, ollamaStats{DoneReason: "load"}, nil)
		writeJSON(w, http.StatusOK, last)
		return
	}
	st, err := s.submit(r.Context(), t)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if !c.stream {
		rep, o, ok := s.generateReply(w, r, t, st)
		if !ok {
			return
		}
		last := sh.chunk(piece{reasoning: rep.reasoning, content: rep.content, calls: rep.calls}, true)
		sh.stats(&last, ollamaStatsOf(c, t, o), rep.tokens)
		writeJSON(w, http.StatusOK, last)
		return
	}
	nd := startNDJSON(w)
	var tokens []scheduler.Token
	o, err := s.generate(r.Context(), t, st, func(p piece) error {
		tokens = append(tokens, p.tokens...)
		if p.reasoning == "" && p.content == "" && len(p.calls) == 0 {
			return nil
		}
		return nd.line(sh.chunk(p, false))
	}, func() error { return nd.line(sh.chunk(piece{}, false)) })
	if err != nil {
		if r.Context().Err() == nil {
			nd.line(failed(r.Context(), err).Ollama())
		}
		return
	}
	last := sh.chunk(piece{}, true)
	sh.stats(&last, ollamaStatsOf(c, t, o), tokens)
	nd.line(last)
}

func tokenIDs(toks []scheduler.Token) []int {
	out := make([]int, len(toks))
	for i, tk := range toks {
		out[i] = tk.ID
	}
	return out
}
