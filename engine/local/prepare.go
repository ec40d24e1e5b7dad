package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/glm"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/turn"
)

// prepared is a turn ready for the scheduler.
type prepared struct {
	id     string
	prompt []int
	sreq   scheduler.Request
	stops  []string
	// parse is how the reply is read back (the GLM dialect).
	parse glm.Options
	// cont is the reply so far, which the prompt ends with: the reply is
	// read on from it.
	cont []int
}

// measureFactor bounds how far past the context a Measure request (and
// CountTokens) counts a prompt's tokens; past it the count is a lower
// bound.
const measureFactor = 4

// prepare turns a request into a scheduler request: the prompt rendered
// and tokenized, the sampling over the model's defaults, the constraints
// of its format or forced tool choice, and the reply's limit. count
// prepares for CountTokens: a prompt over the context is no error.
func (e *Engine) prepare(ctx context.Context, req *turn.Request, count bool) (*prepared, error) {
	p := &prepared{id: req.ID, stops: req.Stops}
	if p.id == "" {
		p.id = apiwire.NewID("turn-")
	}
	if err := e.sampling(req.Sampling, &p.sreq); err != nil {
		return nil, err
	}
	p.sreq.Logprobs, p.sreq.TopLogprobs = req.Logprobs, req.TopLogprobs
	constrained, err := e.format(req.Format, &p.sreq)
	if err != nil {
		return nil, err
	}
	ctxLen := e.Context()
	measure := req.Measure || count
	switch {
	case req.Prompt != nil:
		p.prompt = req.Prompt.Tokens
		if req.Prompt.Tokens == nil {
			p.prompt = e.tok.Encode(req.Prompt.Text)
		}
	default:
		if err := e.render(ctx, req, constrained, measure, p); err != nil {
			return nil, err
		}
	}
	if len(req.Prefix) > 0 {
		p.prompt = append(append([]int{}, req.Prefix...), p.prompt...)
	}
	if len(req.Continue) > 0 {
		vocab := e.ModelConfig().VocabSize
		for _, id := range req.Continue {
			if id < 0 || id >= vocab {
				return nil, apiwire.Invalid("continue", "continue token id %d is outside the vocabulary (0..%d)", id, vocab-1)
			}
		}
		p.prompt = append(slices.Clip(p.prompt), req.Continue...)
		p.cont = req.Continue
	}
	if count {
		return p, nil
	}
	if measure && len(p.prompt) > ctxLen {
		return nil, &turn.ContextError{Prompt: len(p.prompt), Limit: ctxLen}
	}
	if p.sreq.MaxTokens, err = e.maxTokens(req.MaxTokens, len(p.prompt)); err != nil {
		return nil, err
	}
	if n := req.Context; n > 0 && n < ctxLen {
		if len(p.prompt) >= n {
			return nil, &turn.ContextError{Prompt: len(p.prompt), Limit: n, Requested: true}
		}
		p.sreq.MaxTokens = min(p.sreq.MaxTokens, n-len(p.prompt))
	}
	p.sreq.Prompt = p.prompt
	p.sreq.StopTokens = e.ModelConfig().EOSTokenIDs
	p.sreq.Speculative = true
	return p, nil
}

// render renders a conversation into p's prompt and how its reply is
// read: the reasoning state the prompt leaves, the tools, a forced call.
func (e *Engine) render(ctx context.Context, req *turn.Request, constrained, measure bool, p *prepared) error {
	tmpl := e.cfg.Template
	if tmpl == nil {
		return apiwire.Invalid("messages", "the model %q has no chat template; use /v1/completions", e.cfg.ModelID)
	}
	// Every message renders to at least one token: more messages than the
	// context holds are refused before any work is done on them.
	ctxLen := e.Context()
	if len(req.Messages) > ctxLen {
		return apiwire.TooManyMessages(len(req.Messages), ctxLen)
	}
	choice := req.ToolChoice
	if choice.Mode == "" {
		choice.Mode = turn.ToolsAuto
	}
	opts := chat.Options{AddGenerationPrompt: true, EnableThinking: req.Thinking, Extra: req.Vars,
		Limits: e.renderLimits(ctxLen, len(req.Messages))}
	if choice.Mode != turn.ToolsNone {
		opts.Tools = req.Tools
	}
	// Roles the template may not know become ones it does.
	msgs := make([]chat.Message, len(req.Messages))
	for i, m := range req.Messages {
		if m.Role == "developer" {
			m.Role = "system"
		}
		msgs[i] = m
	}
	text, err := tmpl.RenderContext(ctx, msgs, opts)
	if err != nil {
		var le *chat.LimitError
		if errors.As(err, &le) && le.What == "the output" {
			// The text cannot fit the context whatever it tokenizes to.
			return apiwire.ContextLength(ctxLen, "the rendered prompt is longer than %d bytes, more than %d tokens can hold", le.Max, ctxLen)
		}
		if errors.Is(err, chat.ErrTemplateLimit) {
			return &apiwire.Error{Status: 422, Type: "invalid_request_error", Code: "template_limit_exceeded", Param: "messages",
				Message: fmt.Sprintf("the model's chat template exceeded a limit while rendering these messages: %v", err)}
		}
		return apiwire.Invalid("messages", "the chat template refused the messages: %v", err)
	}
	if constrained || choice.Forced() {
		// A forced reply starts at once: close the reasoning block.
		text = glm.CloseThink(text)
	}
	p.parse = glm.Options{Chat: true, InThink: glm.PromptOpensThink(text), Tools: opts.Tools}
	switch choice.Mode {
	case turn.ToolsRequired:
		p.parse.Forced = glm.ForcedCall("")
	case turn.ToolsFunction:
		p.parse.Forced = glm.ForcedCall(choice.Name)
	}
	if p.parse.Forced != "" && e.toolVocab.Usable() {
		if constrained {
			return apiwire.Invalid("tool_choice", "a forced tool_choice cannot be combined with a JSON response format")
		}
		c, err := glm.NewToolConstraint(e.toolVocab, opts.Tools, choice.Name, grammarVocab(e.cfg.Constraints))
		if err != nil {
			var te *glm.ToolChoiceError
			if errors.As(err, &te) {
				return apiwire.Invalid(te.Param, "%s", te.Message)
			}
			return err
		}
		p.sreq.Constraint = c
	}
	text += p.parse.Forced
	limit := ctxLen
	if measure {
		limit = measureFactor * ctxLen
	}
	prompt, ok := e.tok.EncodeLimit(text, limit)
	if !ok {
		return &turn.ContextError{Prompt: len(prompt), AtLeast: true, Limit: ctxLen}
	}
	p.prompt = prompt
	return nil
}

// sampling puts the request's sampling into sreq over the model's
// generation_config defaults (generate.SamplingFor) and checks it against
// generate's ranges, the one set every API shares.
func (e *Engine) sampling(s turn.Sampling, sreq *scheduler.Request) error {
	cfg := e.ModelConfig()
	smp := e.Sampling(s)
	if k := s.TopK; k != nil && *k < -1 {
		return apiwire.Invalid("top_k", "top_k %d must be positive (or -1 for no limit)", *k)
	}
	sreq.Sampling = smp
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&sreq.PresencePenalty, s.PresencePenalty)
	set(&sreq.FrequencyPenalty, s.FrequencyPenalty)
	if len(s.LogitBias) > 0 {
		sreq.LogitBias = make(map[int]float64, len(s.LogitBias))
		for k, b := range s.LogitBias {
			id, err := strconv.Atoi(k)
			if err != nil || id < 0 || id >= cfg.VocabSize {
				return apiwire.Invalid("logit_bias", "logit_bias key %q is not a token id of this model (0..%d)", k, cfg.VocabSize-1)
			}
			sreq.LogitBias[id] = b
		}
	}
	if err := sreq.ValidateSampling(cfg.VocabSize); err != nil {
		var pe *generate.ParamError
		if errors.As(err, &pe) {
			return apiwire.Invalid(pe.Param, "%s", pe.Msg)
		}
		return apiwire.Invalid("", "%v", err)
	}
	return nil
}

// Sampling is the sampling a turn of s gets: s over the model's
// generation_config defaults, with a random seed when s has none.
func (e *Engine) Sampling(s turn.Sampling) generate.Sampling {
	smp := generate.SamplingFor(e.ModelConfig().Generation)
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&smp.Temperature, s.Temperature)
	set(&smp.TopP, s.TopP)
	set(&smp.MinP, s.MinP)
	if k := s.TopK; k != nil {
		switch {
		case *k == -1: // OpenAI-compatible servers' "no limit"
			smp.TopK = 0
		case *k >= 0:
			smp.TopK = *k
		}
	}
	if s.Seed != nil {
		smp.Seed = uint64(*s.Seed)
	} else {
		smp.Seed = mrand.Uint64()
	}
	return smp
}

// format compiles a JSON format into sreq's constraint; it reports
// whether there is one.
func (e *Engine) format(f *turn.Format, sreq *scheduler.Request) (bool, error) {
	if f == nil {
		return false, nil
	}
	if e.cfg.Constraints == nil {
		return false, apiwire.Invalid(f.Param, "%s %s is not available: this server has no constrained decoder", f.Param, f.Type)
	}
	var schema json.RawMessage
	if f.Type == turn.JSONSchema {
		schema = bytes.TrimSpace(f.Schema)
	}
	c, err := e.cfg.Constraints(schema)
	if err != nil {
		return false, apiwire.Invalid(f.Param, "%s: %v", f.Param, err)
	}
	sreq.Constraint = c
	return true, nil
}

// maxTokens resolves the reply's limit: the request's, the engine's cap
// and the context left after the prompt (a request asking for more is
// clamped).
func (e *Engine) maxTokens(requested *int, promptLen int) (int, error) {
	ctx := e.Context()
	if promptLen > ctx {
		return 0, &turn.ContextError{Prompt: promptLen, Limit: ctx}
	}
	limit := max(ctx-promptLen, 1)
	if e.cfg.MaxTokens > 0 {
		limit = min(limit, e.cfg.MaxTokens)
	}
	if requested == nil {
		return limit, nil
	}
	if *requested <= 0 {
		return 0, apiwire.Invalid("max_tokens", "max_tokens must be at least 1, got %d", *requested)
	}
	return min(*requested, limit), nil
}

func containsThinking(src string) bool { return strings.Contains(src, "enable_thinking") }
