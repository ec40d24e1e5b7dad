package turn

import (
	"encoding/json"
	"time"

	"github.com/spoolhq/spool/engine/chat"
)

// Request is one chat turn to run: the conversation (or a raw prompt), the
// tools the model may call, and how to sample, bound and constrain the
// reply. It is plain data: it can be kept, copied and submitted again.
//
// Each API translates its own request into a Request and checks what is
// its own (its field names, its ranges); an Engine checks what needs the
// model (the template, the context, the vocabulary) and refuses the rest
// with an *apiwire.Error or a *ContextError.
type Request struct {
	// ID names the turn in the live status and the UI's events, and is
	// the reply's id ("chatcmpl-…", "msg_…"); the engine mints one when
	// it is empty.
	ID string `json:"id,omitempty"`
	// Model is the model the client named ("" for the default). AnyModel
	// says the name is another vendor's (Claude Code sends Claude's): the
	// engine's default model stands in for it.
	Model    string `json:"model,omitempty"`
	AnyModel bool   `json:"any_model,omitempty"`

	// Messages is the conversation, rendered with the model's chat
	// template; the reply follows it.
	Messages []chat.Message `json:"messages,omitempty"`
	// Tools the model may call, and whether it must (ToolChoice).
	Tools      []chat.Tool `json:"tools,omitempty"`
	ToolChoice ToolChoice  `json:"tool_choice,omitzero"`
	// Thinking switches the template's reasoning on or off (nil: the
	// template's default); Vars are other template variables
	// (chat_template_kwargs, reasoning_effort).
	Thinking *bool          `json:"thinking,omitempty"`
	Vars     map[string]any `json:"vars,omitempty"`

	// Prompt, set instead of Messages, is a raw prompt: no template, the
	// reply read as plain text.
	Prompt *Prompt `json:"prompt,omitempty"`
	// Prefix are token ids put before the prompt (Ollama's context of an
	// earlier generate).
	Prefix []int `json:"prefix,omitempty"`
	// Continue is the reply's tokens so far: the turn goes on from them
	// (a reply cut short, continued), and its pieces are what follows.
	// They count against MaxTokens no more than the prompt does.
	Continue []int `json:"continue,omitempty"`

	// Format constrains the whole reply to JSON (nil: free text).
	Format   *Format  `json:"format,omitempty"`
	Sampling Sampling `json:"sampling,omitzero"`
	// Stops are stop strings: the reply ends before the first that
	// appears, which is not part of it.
	Stops []string `json:"stops,omitempty"`
	// MaxTokens bounds the reply's tokens (nil: the rest of the context,
	// within the engine's own cap); it is at least 1.
	MaxTokens *int `json:"max_tokens,omitempty"`
	// Context, when positive and less than the engine's, bounds the prompt
	// and the reply together (Ollama's num_ctx).
	Context int `json:"context,omitempty"`
	// Logprobs asks for each token's log-probability, and TopLogprobs for
	// that many alternatives.
	Logprobs    bool `json:"logprobs,omitempty"`
	TopLogprobs int  `json:"top_logprobs,omitempty"`
	// Measure counts a prompt over the context on, up to a few contexts,
	// so that its refusal (a *ContextError) says how long it is.
	Measure bool `json:"measure,omitempty"`
	// Stream says the reply is read as it comes; without it an engine may
	// give it whole, in one piece.
	Stream bool `json:"stream,omitempty"`
}

// ToolChoice says whether the reply may, must or must not call a tool.
type ToolChoice struct {
	// Mode is auto (the default), none, required (some tool) or function
	// (the one named).
	Mode string `json:"mode,omitempty"`
	Name string `json:"name,omitempty"`
}

// Tool choice modes.
const (
	ToolsAuto     = "auto"
	ToolsNone     = "none"
	ToolsRequired = "required"
	ToolsFunction = "function"
)

// Forced reports whether the reply must be a tool call.
func (c ToolChoice) Forced() bool { return c.Mode == ToolsRequired || c.Mode == ToolsFunction }

// Prompt is a raw prompt: its text, or (when set) its token ids.
type Prompt struct {
	Text   string `json:"text,omitempty"`
	Tokens []int  `json:"tokens,omitempty"`
}

// Format is a JSON format the reply must follow.
type Format struct {
	// Param is the request field that asked for it (response_format,
	// text.format, format, output_config.format), named in refusals.
	Param string `json:"param"`
	// Type is json_object (any object) or json_schema (Schema, and its
	// Name where the API gives one).
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Format types.
const (
	JSONObject = "json_object"
	JSONSchema = "json_schema"
)

// Sampling is how the reply's tokens are drawn; nil fields take the
// model's defaults (its generation_config).
type Sampling struct {
	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	TopK             *int     `json:"top_k,omitempty"`
	MinP             *float64 `json:"min_p,omitempty"`
	Seed             *int64   `json:"seed,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	// LogitBias maps token ids, as decimal strings, to a bias added to
	// their logits.
	LogitBias map[string]float64 `json:"logit_bias,omitempty"`
}

// Piece is what one step of a turn adds: reasoning, visible text, tool
// calls and the tokens that made them; or nothing (Idle) while the turn
// waits (a queue, a long prefill); or, last, how the turn ended (End).
type Piece struct {
	Reasoning string
	Text      string
	Calls     []Call
	// Tokens are the tokens that made this piece (the local engine's;
	// none from a remote one), with their log-probabilities and text when
	// the request asked for logprobs.
	Tokens []Token
	// Idle says nothing came for the engine's keep-alive interval: a
	// streaming answer sends its keep-alive.
	Idle bool
	// End is set on the last piece.
	End *End
}

// Call is a tool call of the reply. An engine gives it whole, or (a remote
// engine streaming one) in parts of one Index: the first with its ID and
// Name, the next adding to Arguments.
type Call struct {
	// Index is the call's place among the reply's calls, from 0.
	Index int
	ID    string
	Name  string
	// Arguments is a JSON object text (whole), or a part of one.
	Arguments string
}

// Token is a token of the reply.
type Token struct {
	ID int
	// Text is the token's bytes and Logprob its log-probability, set when
	// the request asked for logprobs; Top are the most likely
	// alternatives (TopLogprobs of them).
	Text    string
	Logprob float64
	Top     []Token
}

// End is how a turn ended.
type End struct {
	// Finish is stop, length or tool_calls.
	Finish string
	// StopSequence is the stop string that ended the reply ("" for none).
	StopSequence string
	// Model is the model that answered.
	Model string
	Usage Usage
}

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
)

// Usage counts a turn's tokens.
type Usage struct {
	// PromptTokens is the prompt's length; CachedTokens those reused from
	// an earlier turn or the prompt cache; CacheCreationTokens those whose
	// blocks this turn added to the prompt cache.
	PromptTokens        int
	CachedTokens        int
	CacheCreationTokens int
	CompletionTokens    int
	// Engine is the local engine's account of the turn (nil from a remote
	// engine).
	Engine *EngineUsage
}

// EngineUsage is Spool's own report of a turn, which every API appends to
// its usage object: the lane it ran in and its timings.
type EngineUsage struct {
	// Lane is single or batched; PeakBatch the most turns that shared one
	// of its forwards.
	Lane      string  `json:"lane"`
	PeakBatch int     `json:"peak_batch"`
	QueueMS   float64 `json:"queue_ms"`
	PrefillMS float64 `json:"prefill_ms"`
	DecodeMS  float64 `json:"decode_ms"`
	// DraftsProposed and DraftsAccepted count MTP's speculative tokens.
	DraftsProposed int `json:"mtp_drafts_proposed"`
	DraftsAccepted int `json:"mtp_drafts_accepted"`
	// Prefill and Decode are the times unrounded (Ollama's nanoseconds).
	Prefill time.Duration `json:"-"`
	Decode  time.Duration `json:"-"`
}

// MS is d in milliseconds, to the microsecond.
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
