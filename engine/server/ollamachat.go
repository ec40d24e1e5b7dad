package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/local"
	"github.com/spoolhq/spool/engine/turn"
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
func ollamaFormat(raw json.RawMessage) (*turn.Format, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte(`""`)) {
		return nil, nil
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
		return nil, invalid("format", `format must be "json" or a JSON Schema object, got %s`, raw)
	}
	return format("format", &f)
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
func (s *Server) ollamaBegin(c *ollamaCommon, model string, stream *bool, options, think, keepAlive json.RawMessage) (*bool, map[string]any, error) {
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
		s.logf("ollama: options %v have no effect in Spool and were ignored", opts.ignored)
	}
	c.opts, c.stream = opts, stream == nil || *stream
	return ollamaThink(think)
}

// ollamaLimits applies the options that bound a turn: its sampling, stop
// strings, num_predict and num_ctx.
func ollamaLimits(c *ollamaCommon, t *turn.Request) {
	t.Sampling = c.opts.sampling.sampling()
	t.Stops = c.opts.stop
	if c.opts.numPredict != nil && *c.opts.numPredict > 0 {
		t.MaxTokens = c.opts.numPredict
	}
	if n := c.opts.numCtx; n != nil {
		t.Context = *n
	}
	t.Stream = c.stream
}

// ollamaChatTurn validates an /api/chat request and translates it into a
// turn; nil without an error is a load request (no messages).
func (s *Server) ollamaChatTurn(req *ollamaChatRequest, c *ollamaCommon) (*turn.Request, error) {
	thinking, extra, err := s.ollamaBegin(c, req.Model, req.Stream, req.Options, req.Think, req.KeepAlive)
	if err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 {
		return nil, nil
	}
	msgs, err := ollamaMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	if err := checkMessages("messages", msgs); err != nil {
		return nil, err
	}
	if err := checkTools("tools", req.Tools); err != nil {
		return nil, err
	}
	t := &turn.Request{ID: newID("ollama-"), Model: req.Model, Messages: msgs, Tools: req.Tools, ToolChoice: turn.ToolChoice{Mode: turn.ToolsAuto},
		Thinking: thinking, Vars: extra}
	if t.Format, err = ollamaFormat(req.Format); err != nil {
		return nil, err
	}
	ollamaLimits(c, t)
	return t, nil
}

// ollamaGenerateTurn validates an /api/generate request and translates it
// into a turn: the prompt (with system) through the chat template, or as
// it is with raw; nil without an error is a load request (no prompt).
func (s *Server) ollamaGenerateTurn(req *ollamaGenerateRequest, c *ollamaCommon) (*turn.Request, error) {
	thinking, extra, err := s.ollamaBegin(c, req.Model, req.Stream, req.Options, req.Think, req.KeepAlive)
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
	vocab := s.local.ModelConfig().VocabSize
	for _, id := range req.Context {
		if id < 0 || id >= vocab {
			return nil, invalid("context", "context token id %d is outside the vocabulary (0..%d)", id, vocab-1)
		}
	}
	t := &turn.Request{ID: newID("ollama-"), Model: req.Model, Prefix: req.Context}
	if t.Format, err = ollamaFormat(req.Format); err != nil {
		return nil, err
	}
	if req.Raw {
		t.Prompt = &turn.Prompt{Text: req.Prompt}
	} else {
		if req.System != "" {
			t.Messages = append(t.Messages, chat.Message{Role: "system", Content: req.System})
		}
		t.Messages = append(t.Messages, chat.Message{Role: "user", Content: req.Prompt})
		t.ToolChoice, t.Thinking, t.Vars = turn.ToolChoice{Mode: turn.ToolsNone}, thinking, extra
	}
	ollamaLimits(c, t)
	return t, nil
}

// ollamaContextError words a prompt over the context as Ollama's API
// does: over num_ctx, it names the option.
func ollamaContextError(err error) error {
	var ce *turn.ContextError
	if errors.As(err, &ce) && ce.Requested {
		e := contextLength(ce.Limit, "the prompt has %d tokens (options.num_ctx)", ce.Prompt)
		e.Param = "options.num_ctx"
		return e
	}
	return err
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
func ollamaStatsOf(c *ollamaCommon, end *turn.End) ollamaStats {
	st := ollamaStats{DoneReason: end.Finish, TotalDuration: max(time.Since(c.start).Nanoseconds(), 1),
		PromptEvalCount: end.Usage.PromptTokens, EvalCount: end.Usage.CompletionTokens}
	if st.DoneReason == turn.FinishToolCalls {
		st.DoneReason = turn.FinishStop
	}
	if r := end.Usage.Engine; r != nil {
		st.PromptEvalDuration = r.Prefill.Nanoseconds()
		st.EvalDuration = r.Decode.Nanoseconds()
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
func ollamaCalls(calls []turn.Call) []ollamaToolCall {
	out := make([]ollamaToolCall, len(calls))
	for i, c := range calls {
		out[i].ID = c.ID
		out[i].Function.Index = c.Index
		out[i].Function.Name = c.Name
		args := c.Arguments
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

// ollamaChatReply runs a /api/chat turn (nil: a load request) and
// answers it, streamed or whole as c says.
func (s *Server) ollamaChatReply(w http.ResponseWriter, r *http.Request, c *ollamaCommon, model string, t *turn.Request) {
	ollamaAnswer(s, w, r, c, t, ollamaShape[ollamaChatChunk]{
		chunk: func(p turn.Piece, done bool) ollamaChatChunk {
			m := ollamaMessage{Role: "assistant", Content: p.Text, Thinking: p.Reasoning, ToolCalls: ollamaCalls(p.Calls)}
			return ollamaChatChunk{Model: model, CreatedAt: ollamaTime(time.Now()), Message: m, Done: done}
		},
		stats: func(last *ollamaChatChunk, st ollamaStats, _ *local.Stream, _ []turn.Token) { last.ollamaStats = st },
	})
}

func (s *Server) handleOllamaGenerate(w http.ResponseWriter, r *http.Request) {
	var req ollamaGenerateRequest
	c, t, ok := ollamaTurn(s, w, r, &req, s.ollamaGenerateTurn)
	if !ok {
		return
	}
	ollamaAnswer(s, w, r, c, t, ollamaShape[ollamaGenerateChunk]{
		chunk: func(p turn.Piece, done bool) ollamaGenerateChunk {
			return ollamaGenerateChunk{Model: req.Model, CreatedAt: ollamaTime(time.Now()), Response: p.Text, Thinking: p.Reasoning, Done: done}
		},
		stats: func(last *ollamaGenerateChunk, st ollamaStats, ts *local.Stream, tokens []turn.Token) {
			last.ollamaStats = st
			if ts != nil && !req.Raw {
				last.Context = append(append([]int{}, ts.Prompt()...), tokenIDs(tokens)...)
			}
		},
	})
}

// ollamaTurn decodes an Ollama request into req and translates it into a
// turn with build (nil without an error: a load request); ok is false
// when it has answered an error.
func ollamaTurn[R any](s *Server, w http.ResponseWriter, r *http.Request, req *R, build func(*R, *ollamaCommon) (*turn.Request, error)) (*ollamaCommon, *turn.Request, bool) {
	c := &ollamaCommon{start: time.Now()}
	if err := decodeBody(r, req); err != nil {
		writeError(w, r, err)
		return nil, nil, false
	}
	t, err := build(req, c)
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
	chunk func(p turn.Piece, done bool) C
	// stats stamps the last chunk with the turn's stats; st is the turn
	// and tokens are the reply's (none for a load request).
	stats func(last *C, stats ollamaStats, st *local.Stream, tokens []turn.Token)
}

// ollamaAnswer runs an Ollama turn (nil: a load request, answered done
// with done_reason "load") and answers it in sh's chunks: whole, or
// streamed as NDJSON lines as c says.
func ollamaAnswer[C any](s *Server, w http.ResponseWriter, r *http.Request, c *ollamaCommon, t *turn.Request, sh ollamaShape[C]) {
	if t == nil {
		httpguard.EndParsing(r.Context())
		last := sh.chunk(turn.Piece{}, true)
		sh.stats(&last, ollamaStats{DoneReason: "load"}, nil, nil)
		writeJSON(w, http.StatusOK, last)
		return
	}
	st, err := s.submit(r.Context(), t)
	if err != nil {
		writeError(w, r, ollamaContextError(err))
		return
	}
	if !c.stream {
		rep, ok := s.generateReply(w, r, st)
		if !ok {
			return
		}
		last := sh.chunk(turn.Piece{Reasoning: rep.Reasoning, Text: rep.Text, Calls: rep.Calls}, true)
		sh.stats(&last, ollamaStatsOf(c, &rep.End), st, rep.Tokens)
		writeJSON(w, http.StatusOK, last)
		return
	}
	nd := startNDJSON(w)
	var tokens []turn.Token
	end, err := s.generate(r.Context(), st, func(p turn.Piece) error {
		tokens = append(tokens, p.Tokens...)
		if p.Reasoning == "" && p.Text == "" && len(p.Calls) == 0 {
			return nil
		}
		return nd.line(sh.chunk(p, false))
	}, func() error { return nd.line(sh.chunk(turn.Piece{}, false)) })
	if err != nil {
		if r.Context().Err() == nil {
			nd.line(asAPIError(err).Ollama())
		}
		return
	}
	last := sh.chunk(turn.Piece{}, true)
	sh.stats(&last, ollamaStatsOf(c, end), st, tokens)
	nd.line(last)
}

func tokenIDs(toks []turn.Token) []int {
	out := make([]int, len(toks))
	for i, tk := range toks {
		out[i] = tk.ID
	}
	return out
}
