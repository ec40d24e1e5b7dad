package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/scheduler"
)

// chatRequest is a /v1/chat/completions request. Unknown fields are
// ignored.
type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []chat.Message `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	samplingParams
	Stop               json.RawMessage `json:"stop"`
	Logprobs           bool            `json:"logprobs"`
	TopLogprobs        *int            `json:"top_logprobs"`
	Tools              []chat.Tool     `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ResponseFormat     *responseFormat `json:"response_format"`
	ReasoningEffort    string          `json:"reasoning_effort"`
	ChatTemplateKwargs map[string]any  `json:"chat_template_kwargs"`
	N                  *int            `json:"n"`
}

// chatTurn validates a chat request and prepares its turn.
func (s *Server) chatTurn(ctx context.Context, req *chatRequest) (*turn, error) {
	if err := s.checkModel(req.Model, false); err != nil {
		return nil, err
	}
	if req.N != nil && *req.N != 1 {
		return nil, invalid("n", "n must be 1: one choice per request is supported")
	}
	if err := checkMessages("messages", req.Messages); err != nil {
		return nil, err
	}
	if err := checkTools("tools", req.Tools); err != nil {
		return nil, err
	}
	choice, err := parseToolChoice(req.ToolChoice, req.Tools)
	if err != nil {
		return nil, err
	}
	thinking, extra, err := thinkingFrom(req.ReasoningEffort, req.ChatTemplateKwargs)
	if err != nil {
		return nil, err
	}
	t := &turn{id: newID("chatcmpl-")}
	if t.stops, err = parseStop("stop", req.Stop); err != nil {
		return nil, err
	}
	if err := s.applySampling(req.samplingParams, &t.req); err != nil {
		return nil, err
	}
	if req.TopLogprobs != nil {
		if !req.Logprobs {
			return nil, invalid("top_logprobs", "top_logprobs needs logprobs: true")
		}
		if *req.TopLogprobs < 0 || *req.TopLogprobs > 20 {
			return nil, invalid("top_logprobs", "top_logprobs %d is out of range (0..20)", *req.TopLogprobs)
		}
		t.req.TopLogprobs = *req.TopLogprobs
	}
	t.req.Logprobs = req.Logprobs
	constrained, err := s.constraint("response_format", req.ResponseFormat, t)
	if err != nil {
		return nil, err
	}
	in := chatInput{messages: req.Messages, tools: req.Tools, choice: choice, thinking: thinking, extra: extra, constrained: constrained, ctx: ctx}
	if err := s.renderChat(in, t); err != nil {
		return nil, err
	}
	limit, param := req.MaxCompletionTokens, "max_completion_tokens"
	if limit == nil {
		limit, param = req.MaxTokens, "max_tokens"
	}
	if t.req.MaxTokens, err = s.maxTokens(param, limit, len(t.prompt)); err != nil {
		return nil, err
	}
	s.finishTurn(t)
	return t, nil
}

// finishTurn fills the scheduler request fields every endpoint shares.
func (s *Server) finishTurn(t *turn) {
	t.req.Prompt = t.prompt
	t.req.StopTokens = s.eng.Scheduler.Model().Config().EOSTokenIDs
	t.req.Speculative = true
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	t, st, ok := startTurn(s, w, r, &req, func(req *chatRequest) (*turn, error) { return s.chatTurn(r.Context(), req) })
	if !ok {
		return
	}
	if req.Stream {
		s.streamChat(w, r, t, st, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	s.completeChat(w, r, t, st)
}

// Response shapes.

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *chatUsage   `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatMessage  `json:"message,omitempty"`
	Delta        *chatMessage  `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatMessage struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallDelta `json:"tool_calls,omitempty"`
	Refusal          *string         `json:"refusal,omitempty"`
}

type toolCallDelta struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
}

type tokenLogprob struct {
	Token       string         `json:"token"`
	Logprob     float64        `json:"logprob"`
	Bytes       []int          `json:"bytes"`
	TopLogprobs []tokenLogprob `json:"top_logprobs,omitempty"`
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	engineUsage
}

func chatUsageOf(t *turn, o *outcome) *chatUsage {
	u := &chatUsage{PromptTokens: len(t.prompt), CompletionTokens: o.completion, engineUsage: engineUsageOf(o.res)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if o.res != nil {
		u.PromptTokensDetails.CachedTokens = o.res.CachedTokens
	}
	return u
}

// logprobsOf renders tokens' logprobs in the chat shape.
func (s *Server) logprobsOf(toks []scheduler.Token, top bool) []tokenLogprob {
	out := make([]tokenLogprob, 0, len(toks))
	for _, tk := range toks {
		lp := s.tokenLogprob(tk.ID, tk.Logprob)
		if top {
			lp.TopLogprobs = []tokenLogprob{}
			for _, alt := range tk.Top {
				lp.TopLogprobs = append(lp.TopLogprobs, s.tokenLogprob(alt.ID, alt.Logprob))
			}
		}
		out = append(out, lp)
	}
	return out
}

func (s *Server) tokenLogprob(id int, logprob float64) tokenLogprob {
	b, _ := s.eng.Tokenizer.TokenBytes(id)
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return tokenLogprob{Token: string(b), Logprob: logprob, Bytes: ints}
}

func toolCallDeltas(calls []chat.ToolCall, first int, withIndex bool) []toolCallDelta {
	out := make([]toolCallDelta, len(calls))
	for i, c := range calls {
		d := toolCallDelta{ID: c.ID, Type: "function"}
		if withIndex {
			d.Index = new(first + i)
		}
		d.Function.Name = c.Function.Name
		d.Function.Arguments, _ = c.Function.Arguments.(string)
		out[i] = d
	}
	return out
}

// completeChat answers a non-streaming chat completion.
func (s *Server) completeChat(w http.ResponseWriter, r *http.Request, t *turn, st *scheduler.Stream) {
	rep, o, ok := s.generateReply(w, r, t, st)
	if !ok {
		return
	}
	msg := &chatMessage{Role: "assistant", Content: &rep.content}
	if len(rep.calls) > 0 && rep.content == "" {
		msg.Content = nil
	}
	if rep.reasoning != "" {
		msg.ReasoningContent = &rep.reasoning
	}
	msg.ToolCalls = toolCallDeltas(rep.calls, 0, false)
	choice := chatChoice{Message: msg, FinishReason: &o.finish}
	if t.req.Logprobs {
		choice.Logprobs = &chatLogprobs{Content: s.logprobsOf(rep.tokens, true)}
	}
	writeJSON(w, http.StatusOK, chatCompletion{
		ID: t.id, Object: "chat.completion", Created: time.Now().Unix(), Model: s.cfg.ModelID,
		SystemFingerprint: "spool", Choices: []chatChoice{choice}, Usage: chatUsageOf(t, o),
	})
}

// streamChat answers a streaming chat completion.
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, t *turn, st *scheduler.Stream, includeUsage bool) {
	sse, err := apiwire.StartSSE(w)
	if err != nil {
		s.abandon(t, st)
		return
	}
	created := time.Now().Unix()
	chunk := func(delta *chatMessage, finish *string, lp *chatLogprobs) chatCompletion {
		return chatCompletion{
			ID: t.id, Object: "chat.completion.chunk", Created: created, Model: s.cfg.ModelID, SystemFingerprint: "spool",
			Choices: []chatChoice{{Delta: delta, FinishReason: finish, Logprobs: lp}},
		}
	}
	if err := sse.Data(chunk(&chatMessage{Role: "assistant", Content: new("")}, nil, nil)); err != nil {
		s.abandon(t, st)
		return
	}
	nCalls := 0
	o, err := s.generate(r.Context(), t, st, func(p piece) error {
		var lp *chatLogprobs
		if t.req.Logprobs && len(p.tokens) > 0 {
			lp = &chatLogprobs{Content: s.logprobsOf(p.tokens, true)}
		}
		if p.reasoning != "" {
			if err := sse.Data(chunk(&chatMessage{ReasoningContent: &p.reasoning}, nil, nil)); err != nil {
				return err
			}
		}
		if p.content != "" || lp != nil {
			if err := sse.Data(chunk(&chatMessage{Content: &p.content}, nil, lp)); err != nil {
				return err
			}
		}
		if len(p.calls) > 0 {
			if err := sse.Data(chunk(&chatMessage{ToolCalls: toolCallDeltas(p.calls, nCalls, true)}, nil, nil)); err != nil {
				return err
			}
			nCalls += len(p.calls)
		}
		return nil
	}, func() error { return sse.Comment("keep-alive") })
	if err != nil {
		if r.Context().Err() == nil {
			sse.Data(failed(r.Context(), err).OpenAI())
		}
		return
	}
	if err := sse.Data(chunk(&chatMessage{}, &o.finish, nil)); err != nil {
		return
	}
	if includeUsage {
		c := chunk(nil, nil, nil)
		c.Choices = []chatChoice{}
		c.Usage = chatUsageOf(t, o)
		if err := sse.Data(c); err != nil {
			return
		}
	}
	sse.Done()
}
