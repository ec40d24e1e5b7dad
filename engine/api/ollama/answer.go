package ollama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// Stats are the timing fields of a final answer, in nanoseconds.
type Stats struct {
	DoneReason         string `json:"done_reason,omitempty"`
	TotalDuration      int64  `json:"total_duration,omitempty"`
	LoadDuration       int64  `json:"load_duration,omitempty"`
	PromptEvalCount    int    `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64  `json:"prompt_eval_duration,omitempty"`
	EvalCount          int    `json:"eval_count,omitempty"`
	EvalDuration       int64  `json:"eval_duration,omitempty"`
}

// statsOf are a finished turn's timings; load_duration is the time before
// the engine started on it (parsing, template, tokenizing, the queue: the
// model never loads per request).
func (c *Call) statsOf(end *turn.End) Stats {
	st := Stats{DoneReason: end.Finish, TotalDuration: max(time.Since(c.Start).Nanoseconds(), 1),
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

// Time is Ollama's timestamp form.
func Time(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ChatChunk is an /api/chat answer or stream line.
type ChatChunk struct {
	Model     string  `json:"model"`
	CreatedAt string  `json:"created_at"`
	Message   Message `json:"message"`
	Done      bool    `json:"done"`
	Stats
}

// GenerateChunk is an /api/generate answer or stream line.
type GenerateChunk struct {
	Model     string `json:"model"`
	CreatedAt string `json:"created_at"`
	Response  string `json:"response"`
	Thinking  string `json:"thinking,omitempty"`
	Done      bool   `json:"done"`
	Stats
	Context []int `json:"context,omitempty"`
}

// calls renders tool calls in Ollama's shape (arguments an object).
func calls(cs []turn.Call) []ToolCall {
	out := make([]ToolCall, len(cs))
	for i, c := range cs {
		out[i].ID = c.ID
		out[i].Function.Index = c.Index
		out[i].Function.Name = c.Name
		if json.Valid([]byte(c.Arguments)) {
			out[i].Function.Arguments = json.RawMessage(c.Arguments)
		} else {
			out[i].Function.Arguments, _ = json.Marshal(c.Arguments)
		}
	}
	return out
}

// Answer is how an endpoint words a turn's answer: the answer to a load
// request, the whole reply, or its NDJSON stream.
type Answer interface {
	// Load is the answer to a load request (no prompt): done, "load".
	Load() any
	// Reply is the answer of a whole reply to a prompt of tokens.
	Reply(rep *turn.Reply, prompt []int) any
	// Stream is the writer of the streamed answer to a prompt of tokens.
	Stream(nd *NDJSON, prompt []int) turn.Writer
}

// answer words an endpoint's answer in chunks of type C.
type answer[C any] struct {
	c *Call
	// chunk is the chunk of a piece of the reply (the whole reply when
	// not streamed, nothing for a keep-alive or the streamed last line);
	// done marks the last chunk.
	chunk func(p turn.Piece, done bool) C
	// stats stamps the last chunk with the turn's stats; prompt and tokens
	// are the turn's (none for a load request).
	stats func(last *C, st Stats, prompt []int, tokens []turn.Token)
}

// ChatAnswer is /api/chat's answer by model.
func ChatAnswer(model string, c *Call) Answer {
	return &answer[ChatChunk]{c: c,
		chunk: func(p turn.Piece, done bool) ChatChunk {
			m := Message{Role: "assistant", Content: p.Text, Thinking: p.Reasoning, ToolCalls: calls(p.Calls)}
			return ChatChunk{Model: model, CreatedAt: Time(time.Now()), Message: m, Done: done}
		},
		stats: func(last *ChatChunk, st Stats, _ []int, _ []turn.Token) { last.Stats = st },
	}
}

// GenerateAnswer is /api/generate's answer to r: the last chunk carries the
// context (prompt and reply's tokens) of a templated prompt.
func GenerateAnswer(r *GenerateRequest, c *Call) Answer {
	return &answer[GenerateChunk]{c: c,
		chunk: func(p turn.Piece, done bool) GenerateChunk {
			return GenerateChunk{Model: r.Model, CreatedAt: Time(time.Now()), Response: p.Text, Thinking: p.Reasoning, Done: done}
		},
		stats: func(last *GenerateChunk, st Stats, prompt []int, tokens []turn.Token) {
			last.Stats = st
			if prompt != nil && !r.Raw {
				last.Context = append(append([]int{}, prompt...), tokenIDs(tokens)...)
			}
		},
	}
}

func (a *answer[C]) Load() any {
	last := a.chunk(turn.Piece{}, true)
	a.stats(&last, Stats{DoneReason: "load"}, nil, nil)
	return last
}

func (a *answer[C]) Reply(rep *turn.Reply, prompt []int) any {
	last := a.chunk(turn.Piece{Reasoning: rep.Reasoning, Text: rep.Text, Calls: rep.Calls}, true)
	a.stats(&last, a.c.statsOf(&rep.End), prompt, rep.Tokens)
	return last
}

func (a *answer[C]) Stream(nd *NDJSON, prompt []int) turn.Writer {
	return &streamAnswer[C]{a: a, nd: nd, prompt: prompt}
}

// streamAnswer writes an answer as NDJSON lines as its turn runs.
type streamAnswer[C any] struct {
	a      *answer[C]
	nd     *NDJSON
	prompt []int
	tokens []turn.Token
}

func (s *streamAnswer[C]) Piece(p turn.Piece) error {
	if p.Idle {
		return s.nd.Line(s.a.chunk(turn.Piece{}, false))
	}
	s.tokens = append(s.tokens, p.Tokens...)
	if p.Reasoning != "" || p.Text != "" || len(p.Calls) > 0 {
		if err := s.nd.Line(s.a.chunk(turn.Piece{Reasoning: p.Reasoning, Text: p.Text, Calls: p.Calls}, false)); err != nil {
			return err
		}
	}
	if p.End == nil {
		return nil
	}
	last := s.a.chunk(turn.Piece{}, true)
	s.a.stats(&last, s.a.c.statsOf(p.End), s.prompt, s.tokens)
	return s.nd.Line(last)
}

func (s *streamAnswer[C]) Fail(err error) error { return s.nd.Line(turn.Error(err).Ollama()) }

func tokenIDs(toks []turn.Token) []int {
	out := make([]int, len(toks))
	for i, tk := range toks {
		out[i] = tk.ID
	}
	return out
}

// NDJSON writes a newline-delimited JSON stream (Ollama's).
type NDJSON struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// StartNDJSON commits a 200 NDJSON response and flushes the headers, so
// that clients see them before the prompt is prefilled.
func StartNDJSON(w http.ResponseWriter) *NDJSON {
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	nd := &NDJSON{w: w, rc: http.NewResponseController(w)}
	nd.rc.Flush()
	return nd
}

// Line writes v as one JSON line.
func (nd *NDJSON) Line(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("ollama: encoding a stream line: %w", err)
	}
	nd.rc.SetWriteDeadline(time.Now().Add(apiwire.SSEWriteTimeout))
	if _, err := nd.w.Write(buf.Bytes()); err != nil {
		return err
	}
	return nd.rc.Flush()
}
