package openai

import (
	"encoding/json"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/turn"
)

// ChatRequest is a /v1/chat/completions request. Unknown fields are
// ignored.
type ChatRequest struct {
	Model         string         `json:"model"`
	Messages      []chat.Message `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	Sampling
	Stop               json.RawMessage `json:"stop"`
	Logprobs           bool            `json:"logprobs"`
	TopLogprobs        *int            `json:"top_logprobs"`
	Tools              []chat.Tool     `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ResponseFormat     *ResponseFormat `json:"response_format"`
	ReasoningEffort    string          `json:"reasoning_effort"`
	ChatTemplateKwargs map[string]any  `json:"chat_template_kwargs"`
	N                  *int            `json:"n"`
}

// IncludeUsage reports whether a stream ends with a usage chunk.
func (r *ChatRequest) IncludeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// Turn checks the request and translates it into a turn of id.
func (r *ChatRequest) Turn(id string) (*turn.Request, error) {
	if r.N != nil && *r.N != 1 {
		return nil, apiwire.Invalid("n", "n must be 1: one choice per request is supported")
	}
	if err := turn.CheckMessages("messages", r.Messages); err != nil {
		return nil, err
	}
	if err := turn.CheckTools("tools", r.Tools); err != nil {
		return nil, err
	}
	choice, err := ToolChoice(r.ToolChoice, r.Tools)
	if err != nil {
		return nil, err
	}
	thinking, extra, err := Thinking(r.ReasoningEffort, r.ChatTemplateKwargs)
	if err != nil {
		return nil, err
	}
	t := &turn.Request{ID: id, Model: r.Model, Messages: r.Messages, Tools: r.Tools, ToolChoice: choice,
		Thinking: thinking, Vars: extra, Sampling: r.Sampling.Turn(), Logprobs: r.Logprobs, Stream: r.Stream}
	if t.Stops, err = Stop("stop", r.Stop); err != nil {
		return nil, err
	}
	if r.TopLogprobs != nil {
		if !r.Logprobs {
			return nil, apiwire.Invalid("top_logprobs", "top_logprobs needs logprobs: true")
		}
		if *r.TopLogprobs < 0 || *r.TopLogprobs > 20 {
			return nil, apiwire.Invalid("top_logprobs", "top_logprobs %d is out of range (0..20)", *r.TopLogprobs)
		}
		t.TopLogprobs = *r.TopLogprobs
	}
	if t.Format, err = r.ResponseFormat.Format("response_format"); err != nil {
		return nil, err
	}
	limit, param := r.MaxCompletionTokens, "max_completion_tokens"
	if limit == nil {
		limit, param = r.MaxTokens, "max_tokens"
	}
	if t.MaxTokens, err = turn.CheckMaxTokens(param, limit); err != nil {
		return nil, err
	}
	return t, nil
}

// ChatCompletion is a chat completion or one of its chunks.
type ChatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []ChatChoice `json:"choices"`
	Usage             *Usage       `json:"usage,omitempty"`
}

// ChatChoice is a completion's choice: a whole message, or a delta.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      *ChatMessage  `json:"message,omitempty"`
	Delta        *ChatMessage  `json:"delta,omitempty"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// ChatMessage is an answer's message or a chunk's delta.
type ChatMessage struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
	Refusal          *string         `json:"refusal,omitempty"`
}

// ToolCallDelta is a tool call of a message (with its index, in a chunk).
type ToolCallDelta struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ChatLogprobs are a choice's tokens' log-probabilities.
type ChatLogprobs struct {
	Content []TokenLogprob `json:"content"`
}

// TokenLogprob is one token's log-probability and its alternatives.
type TokenLogprob struct {
	Token       string         `json:"token"`
	Logprob     float64        `json:"logprob"`
	Bytes       []int          `json:"bytes"`
	TopLogprobs []TokenLogprob `json:"top_logprobs,omitempty"`
}

// logprobsOf renders tokens' logprobs in the chat shape.
func logprobsOf(toks []turn.Token) []TokenLogprob {
	out := make([]TokenLogprob, 0, len(toks))
	for _, tk := range toks {
		lp := tokenLogprob(tk)
		lp.TopLogprobs = []TokenLogprob{}
		for _, alt := range tk.Top {
			lp.TopLogprobs = append(lp.TopLogprobs, tokenLogprob(alt))
		}
		out = append(out, lp)
	}
	return out
}

func tokenLogprob(tk turn.Token) TokenLogprob {
	ints := make([]int, len(tk.Text))
	for i := range len(tk.Text) {
		ints[i] = int(tk.Text[i])
	}
	return TokenLogprob{Token: tk.Text, Logprob: tk.Logprob, Bytes: ints}
}

// toolCallDeltas are calls in the chat shape; withIndex numbers them (a
// stream's deltas).
func toolCallDeltas(calls []turn.Call, withIndex bool) []ToolCallDelta {
	out := make([]ToolCallDelta, len(calls))
	for i, c := range calls {
		d := ToolCallDelta{ID: c.ID, Type: "function"}
		if withIndex {
			d.Index = new(c.Index)
		}
		d.Function.Name = c.Name
		d.Function.Arguments = c.Arguments
		out[i] = d
	}
	return out
}

// ChatReply is the answer to a chat request whose whole reply is rep;
// logprobs says the request asked for them.
func ChatReply(a Answer, rep *turn.Reply, logprobs bool) ChatCompletion {
	text, reasoning := rep.Text, rep.Reasoning
	msg := &ChatMessage{Role: "assistant", Content: &text}
	if len(rep.Calls) > 0 && text == "" {
		msg.Content = nil
	}
	if reasoning != "" {
		msg.ReasoningContent = &reasoning
	}
	msg.ToolCalls = toolCallDeltas(rep.Calls, false)
	finish := rep.End.Finish
	choice := ChatChoice{Message: msg, FinishReason: &finish}
	if logprobs {
		choice.Logprobs = &ChatLogprobs{Content: logprobsOf(rep.Tokens)}
	}
	return ChatCompletion{ID: a.ID, Object: "chat.completion", Created: a.Created, Model: a.Model,
		SystemFingerprint: "spool", Choices: []ChatChoice{choice}, Usage: UsageOf(rep.End.Usage)}
}

// ChatStream writes a chat completion's event stream as its turn runs (a
// turn.Writer): the assistant's first chunk (Start), a chunk per piece
// of reasoning, text (with its logprobs) and tool calls, a keep-alive
// while the turn waits, and the finish chunk, the usage chunk when asked
// for, and [DONE].
type ChatStream struct {
	sse                    *apiwire.SSE
	a                      Answer
	logprobs, includeUsage bool
}

// NewChatStream is the stream of the answer a on sse.
func NewChatStream(sse *apiwire.SSE, a Answer, logprobs, includeUsage bool) *ChatStream {
	return &ChatStream{sse: sse, a: a, logprobs: logprobs, includeUsage: includeUsage}
}

func (s *ChatStream) chunk(delta *ChatMessage, finish *string, lp *ChatLogprobs) ChatCompletion {
	return ChatCompletion{ID: s.a.ID, Object: "chat.completion.chunk", Created: s.a.Created, Model: s.a.Model, SystemFingerprint: "spool",
		Choices: []ChatChoice{{Delta: delta, FinishReason: finish, Logprobs: lp}}}
}

// Start writes the assistant's first chunk.
func (s *ChatStream) Start() error {
	return s.sse.Data(s.chunk(&ChatMessage{Role: "assistant", Content: new("")}, nil, nil))
}

// Piece writes what a piece of the turn adds.
func (s *ChatStream) Piece(p turn.Piece) error {
	if p.Idle {
		return s.sse.Comment("keep-alive")
	}
	var lp *ChatLogprobs
	if s.logprobs && len(p.Tokens) > 0 {
		lp = &ChatLogprobs{Content: logprobsOf(p.Tokens)}
	}
	if p.Reasoning != "" {
		if err := s.sse.Data(s.chunk(&ChatMessage{ReasoningContent: &p.Reasoning}, nil, nil)); err != nil {
			return err
		}
	}
	if p.Text != "" || lp != nil {
		if err := s.sse.Data(s.chunk(&ChatMessage{Content: &p.Text}, nil, lp)); err != nil {
			return err
		}
	}
	if len(p.Calls) > 0 {
		if err := s.sse.Data(s.chunk(&ChatMessage{ToolCalls: toolCallDeltas(p.Calls, true)}, nil, nil)); err != nil {
			return err
		}
	}
	if p.End == nil {
		return nil
	}
	if err := s.sse.Data(s.chunk(&ChatMessage{}, &p.End.Finish, nil)); err != nil {
		return err
	}
	if s.includeUsage {
		c := s.chunk(nil, nil, nil)
		c.Choices = []ChatChoice{}
		c.Usage = UsageOf(p.End.Usage)
		if err := s.sse.Data(c); err != nil {
			return err
		}
	}
	return s.sse.Done()
}

// Fail ends the stream with the error's event.
func (s *ChatStream) Fail(err error) error { return s.sse.Data(turn.Error(err).OpenAI()) }
