package openai

import (
	"bytes"
	"encoding/json"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// CompletionRequest is a legacy /v1/completions request: raw text in, no
// chat template.
type CompletionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Suffix        string          `json:"suffix"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens *int `json:"max_tokens"`
	Sampling
	Stop     json.RawMessage `json:"stop"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
	N        *int            `json:"n"`
	BestOf   *int            `json:"best_of"`
}

// IncludeUsage reports whether a stream ends with a usage chunk.
func (r *CompletionRequest) IncludeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// CompletionMaxTokens is OpenAI's default max_tokens for completions.
const CompletionMaxTokens = 16

// prompt reads "prompt": a string, an array of one string, an array of
// token ids (each below vocab), or an array of one such array.
func (r *CompletionRequest) prompt(vocab int) (*turn.Prompt, error) {
	raw := bytes.TrimSpace(r.Prompt)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, apiwire.Invalid("prompt", "prompt is required")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return &turn.Prompt{Text: text}, nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil {
		if len(texts) != 1 {
			return nil, apiwire.Invalid("prompt", "prompt must hold exactly one string (batches of prompts are not supported)")
		}
		return &turn.Prompt{Text: texts[0]}, nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err != nil {
		var batch [][]int
		if err := json.Unmarshal(raw, &batch); err != nil || len(batch) != 1 {
			return nil, apiwire.Invalid("prompt", "prompt must be a string, an array of one string, or an array of token ids")
		}
		ids = batch[0]
	}
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return nil, apiwire.Invalid("prompt", "prompt token id %d is outside the vocabulary (0..%d)", id, vocab-1)
		}
	}
	return &turn.Prompt{Tokens: ids}, nil
}

// Turn checks the request and translates it into a turn of id; vocab is
// the model's vocabulary size (a prompt of token ids is checked against
// it).
func (r *CompletionRequest) Turn(id string, vocab int) (*turn.Request, error) {
	if r.N != nil && *r.N != 1 {
		return nil, apiwire.Invalid("n", "n must be 1: one choice per request is supported")
	}
	if r.BestOf != nil && *r.BestOf != 1 {
		return nil, apiwire.Invalid("best_of", "best_of must be 1")
	}
	if r.Suffix != "" {
		return nil, apiwire.Invalid("suffix", "suffix (fill-in-the-middle) is not supported by this model")
	}
	p, err := r.prompt(vocab)
	if err != nil {
		return nil, err
	}
	if p.Text == "" && len(p.Tokens) == 0 {
		return nil, apiwire.Invalid("prompt", "prompt is empty")
	}
	t := &turn.Request{ID: id, Model: r.Model, Prompt: p, Sampling: r.Sampling.Turn(), Stream: r.Stream}
	if t.Stops, err = Stop("stop", r.Stop); err != nil {
		return nil, err
	}
	if r.Logprobs != nil {
		if *r.Logprobs < 0 || *r.Logprobs > 5 {
			return nil, apiwire.Invalid("logprobs", "logprobs %d is out of range (0..5)", *r.Logprobs)
		}
		t.Logprobs, t.TopLogprobs = true, *r.Logprobs
	}
	limit := r.MaxTokens
	if limit == nil {
		limit = new(CompletionMaxTokens)
	}
	if t.MaxTokens, err = turn.CheckMaxTokens("max_tokens", limit); err != nil {
		return nil, err
	}
	return t, nil
}

// Completion is a completion or one of its chunks.
type Completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []CompletionChoice `json:"choices"`
	Usage             *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is a completion's choice.
type CompletionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// CompletionLogprobs are a completion's tokens' log-probabilities.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func completionLogprobs(toks []turn.Token, offset int) *CompletionLogprobs {
	lp := &CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, tk := range toks {
		lp.Tokens = append(lp.Tokens, tk.Text)
		lp.TokenLogprobs = append(lp.TokenLogprobs, tk.Logprob)
		top := map[string]float64{}
		for _, alt := range tk.Top {
			top[alt.Text] = alt.Logprob
		}
		lp.TopLogprobs = append(lp.TopLogprobs, top)
		lp.TextOffset = append(lp.TextOffset, offset)
		offset += len(tk.Text)
	}
	return lp
}

func completionObject(a Answer, text string, finish *string, lp *CompletionLogprobs) Completion {
	return Completion{ID: a.ID, Object: "text_completion", Created: a.Created, Model: a.Model, SystemFingerprint: "spool",
		Choices: []CompletionChoice{{Text: text, Logprobs: lp, FinishReason: finish}}}
}

// CompletionReply is the answer to a completion request whose whole reply
// is rep; echo is the prompt's text when the request echoes it.
func CompletionReply(a Answer, rep *turn.Reply, echo string, logprobs bool) Completion {
	var lp *CompletionLogprobs
	if logprobs {
		lp = completionLogprobs(rep.Tokens, len(echo))
	}
	finish := rep.End.Finish
	c := completionObject(a, echo+rep.Text, &finish, lp)
	c.Usage = UsageOf(rep.End.Usage)
	return c
}

// CompletionStream writes a completion's event stream as its turn runs (a
// turn.Writer): the echoed prompt (Start), a chunk per piece of text with
// its logprobs, keep-alives, the finish chunk, the usage chunk when asked
// for, and [DONE].
type CompletionStream struct {
	sse                    *apiwire.SSE
	a                      Answer
	echo                   string
	offset                 int
	logprobs, includeUsage bool
}

// NewCompletionStream is the stream of the answer a on sse.
func NewCompletionStream(sse *apiwire.SSE, a Answer, echo string, logprobs, includeUsage bool) *CompletionStream {
	return &CompletionStream{sse: sse, a: a, echo: echo, logprobs: logprobs, includeUsage: includeUsage}
}

// Start writes the echoed prompt, if any.
func (s *CompletionStream) Start() error {
	if s.echo == "" {
		return nil
	}
	s.offset = len(s.echo)
	return s.sse.Data(completionObject(s.a, s.echo, nil, nil))
}

// Piece writes what a piece of the turn adds.
func (s *CompletionStream) Piece(p turn.Piece) error {
	if p.Idle {
		return s.sse.Comment("keep-alive")
	}
	if hasOutput(p) {
		var lp *CompletionLogprobs
		if s.logprobs {
			lp = completionLogprobs(p.Tokens, s.offset)
		}
		s.offset += len(p.Text)
		if p.Text != "" || lp != nil {
			if err := s.sse.Data(completionObject(s.a, p.Text, nil, lp)); err != nil {
				return err
			}
		}
	}
	if p.End == nil {
		return nil
	}
	if err := s.sse.Data(completionObject(s.a, "", &p.End.Finish, nil)); err != nil {
		return err
	}
	if s.includeUsage {
		c := completionObject(s.a, "", nil, nil)
		c.Choices = []CompletionChoice{}
		c.Usage = UsageOf(p.End.Usage)
		if err := s.sse.Data(c); err != nil {
			return err
		}
	}
	return s.sse.Done()
}

// Fail ends the stream with the error's event.
func (s *CompletionStream) Fail(err error) error { return s.sse.Data(turn.Error(err).OpenAI()) }
