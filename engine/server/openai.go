package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/local"
	"github.com/spoolhq/spool/engine/turn"
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

// chatTurn validates a chat request and translates it into a turn.
func (s *Server) chatTurn(req *chatRequest) (*turn.Request, error) {
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
	t := &turn.Request{ID: newID("chatcmpl-"), Model: req.Model, Messages: req.Messages, Tools: req.Tools, ToolChoice: choice,
		Thinking: thinking, Vars: extra, Sampling: req.sampling(), Logprobs: req.Logprobs, Stream: req.Stream}
	if t.Stops, err = parseStop("stop", req.Stop); err != nil {
		return nil, err
	}
	if req.TopLogprobs != nil {
		if !req.Logprobs {
			return nil, invalid("top_logprobs", "top_logprobs needs logprobs: true")
		}
		if *req.TopLogprobs < 0 || *req.TopLogprobs > 20 {
			return nil, invalid("top_logprobs", "top_logprobs %d is out of range (0..20)", *req.TopLogprobs)
		}
		t.TopLogprobs = *req.TopLogprobs
	}
	if t.Format, err = format("response_format", req.ResponseFormat); err != nil {
		return nil, err
	}
	limit, param := req.MaxCompletionTokens, "max_completion_tokens"
	if limit == nil {
		limit, param = req.MaxTokens, "max_tokens"
	}
	if t.MaxTokens, err = maxTokens(param, limit); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	st, ok := startTurn(s, w, r, &req, s.chatTurn)
	if !ok {
		return
	}
	if req.Stream {
		s.streamChat(w, r, st, req.Logprobs, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	s.completeChat(w, r, st, req.Logprobs)
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
	*turn.EngineUsage
}

func chatUsageOf(u turn.Usage) *chatUsage {
	out := &chatUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, EngineUsage: u.Engine}
	out.TotalTokens = out.PromptTokens + out.CompletionTokens
	out.PromptTokensDetails.CachedTokens = u.CachedTokens
	return out
}

// logprobsOf renders tokens' logprobs in the chat shape.
func logprobsOf(toks []turn.Token, top bool) []tokenLogprob {
	out := make([]tokenLogprob, 0, len(toks))
	for _, tk := range toks {
		lp := tokenLogprobOf(tk)
		if top {
			lp.TopLogprobs = []tokenLogprob{}
			for _, alt := range tk.Top {
				lp.TopLogprobs = append(lp.TopLogprobs, tokenLogprobOf(alt))
			}
		}
		out = append(out, lp)
	}
	return out
}

func tokenLogprobOf(tk turn.Token) tokenLogprob {
	ints := make([]int, len(tk.Text))
	for i := range len(tk.Text) {
		ints[i] = int(tk.Text[i])
	}
	return tokenLogprob{Token: tk.Text, Logprob: tk.Logprob, Bytes: ints}
}

// toolCallDeltas are calls in the chat shape; withIndex numbers them (a
// stream's deltas).
func toolCallDeltas(calls []turn.Call, withIndex bool) []toolCallDelta {
	out := make([]toolCallDelta, len(calls))
	for i, c := range calls {
		d := toolCallDelta{ID: c.ID, Type: "function"}
		if withIndex {
			d.Index = new(c.Index)
		}
		d.Function.Name = c.Name
		d.Function.Arguments = c.Arguments
		out[i] = d
	}
	return out
}

// completeChat answers a non-streaming chat completion.
func (s *Server) completeChat(w http.ResponseWriter, r *http.Request, st *local.Stream, logprobs bool) {
	rep, ok := s.generateReply(w, r, st)
	if !ok {
		return
	}
	msg := &chatMessage{Role: "assistant", Content: &rep.Text}
	if len(rep.Calls) > 0 && rep.Text == "" {
		msg.Content = nil
	}
	if rep.Reasoning != "" {
		msg.ReasoningContent = &rep.Reasoning
	}
	msg.ToolCalls = toolCallDeltas(rep.Calls, false)
	choice := chatChoice{Message: msg, FinishReason: &rep.End.Finish}
	if logprobs {
		choice.Logprobs = &chatLogprobs{Content: logprobsOf(rep.Tokens, true)}
	}
	writeJSON(w, http.StatusOK, chatCompletion{
		ID: st.ID(), Object: "chat.completion", Created: time.Now().Unix(), Model: s.cfg.ModelID,
		SystemFingerprint: "spool", Choices: []chatChoice{choice}, Usage: chatUsageOf(rep.End.Usage),
	})
}

// streamChat answers a streaming chat completion.
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, st *local.Stream, logprobs, includeUsage bool) {
	sse, err := apiwire.StartSSE(w)
	if err != nil {
		st.Close()
		return
	}
	created := time.Now().Unix()
	chunk := func(delta *chatMessage, finish *string, lp *chatLogprobs) chatCompletion {
		return chatCompletion{
			ID: st.ID(), Object: "chat.completion.chunk", Created: created, Model: s.cfg.ModelID, SystemFingerprint: "spool",
			Choices: []chatChoice{{Delta: delta, FinishReason: finish, Logprobs: lp}},
		}
	}
	if err := sse.Data(chunk(&chatMessage{Role: "assistant", Content: new("")}, nil, nil)); err != nil {
		st.Close()
		return
	}
	end, err := s.generate(r.Context(), st, func(p turn.Piece) error {
		var lp *chatLogprobs
		if logprobs && len(p.Tokens) > 0 {
			lp = &chatLogprobs{Content: logprobsOf(p.Tokens, true)}
		}
		if p.Reasoning != "" {
			if err := sse.Data(chunk(&chatMessage{ReasoningContent: &p.Reasoning}, nil, nil)); err != nil {
				return err
			}
		}
		if p.Text != "" || lp != nil {
			if err := sse.Data(chunk(&chatMessage{Content: &p.Text}, nil, lp)); err != nil {
				return err
			}
		}
		if len(p.Calls) > 0 {
			if err := sse.Data(chunk(&chatMessage{ToolCalls: toolCallDeltas(p.Calls, true)}, nil, nil)); err != nil {
				return err
			}
		}
		return nil
	}, func() error { return sse.Comment("keep-alive") })
	if err != nil {
		if r.Context().Err() == nil {
			sse.Data(asAPIError(err).OpenAI())
		}
		return
	}
	if err := sse.Data(chunk(&chatMessage{}, &end.Finish, nil)); err != nil {
		return
	}
	if includeUsage {
		c := chunk(nil, nil, nil)
		c.Choices = []chatChoice{}
		c.Usage = chatUsageOf(end.Usage)
		if err := sse.Data(c); err != nil {
			return
		}
	}
	sse.Done()
}
