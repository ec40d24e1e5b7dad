package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/spoolhq/spool/engine/chat/internal/jinja"
	"github.com/spoolhq/spool/internal/regularfile"
)

// The engine is github.com/ardanlabs/jinja, written for chat templates
// (loop controls, Python string and dict methods, namespace,
// strftime_now). This package adds what transformers does around Jinja2:
//   - Jinja2's lexer-level whitespace rules with trim_blocks,
//     lstrip_blocks and keep_trailing_newline=False (see prepareSource);
//   - the tojson filter is json.dumps(x, ensure_ascii=False, indent=None,
//     separators=None, sort_keys=False) with those keyword arguments; the
//     engine's built-in filter cannot be replaced, so filter uses of
//     "tojson" in the source are renamed to tojsonName, which Render binds;
//   - raise_exception surfaces as a *RaisedError;
//   - the tokenizer's special tokens (bos_token, eos_token, ...) are
//     template variables, and tools and documents default to None.
//
// Known differences from Jinja2 that remain in the engine: {{ none }}
// prints "" (Jinja2: "None"), floats print with Go's %g (1.0 as "1"),
// % on negative numbers follows Go, and tuples print as lists. Message
// content that is null is passed as "" (as vLLM does), so chat templates
// do not meet the first case for content.

// tojsonName is the filter name that tojson uses are renamed to.
const tojsonName = "spool_tojson"

// Templates come with downloaded models, so they are untrusted: a render is
// bounded in steps, output size, list size, call depth and time, and stops
// when its context ends (the engine is a patched copy of
// github.com/ardanlabs/jinja in internal/jinja, which has no such limits
// upstream). Exceeding a limit returns an error wrapping ErrTemplateLimit.

// Limits bound one render; zero fields take DefaultLimits.
type Limits = jinja.Limits

// LimitError reports the limit a render ran into.
type LimitError = jinja.LimitError

// DefaultLimits are the limits of a render whose Options set none.
var DefaultLimits = jinja.DefaultLimits

// ErrTemplateLimit is wrapped by the error of a render that exceeded a limit.
var ErrTemplateLimit = jinja.ErrLimit

// MaxTemplateBytes bounds the size of a chat template's source.
const MaxTemplateBytes = 1 << 20

// maxConfigBytes bounds tokenizer_config.json and chat_template.json, which
// may hold a vocabulary's added tokens besides the template.
const maxConfigBytes = 64 << 20

// RaisedError reports a template's call of raise_exception(message);
// Render returns it wrapped.
type RaisedError struct {
	Message string
}

func (e *RaisedError) Error() string {
	return "template raised an exception: " + e.Message
}

// Template is a parsed chat template. It is safe for concurrent use.
type Template struct {
	tmpl   *jinja.Template
	source string
	// specials are the tokenizer's special tokens by variable name.
	specials map[string]string
}

// ParseTemplate parses a Jinja chat template.
func ParseTemplate(source string) (tmpl *Template, err error) {
	if len(source) > MaxTemplateBytes {
		return nil, fmt.Errorf("chat: parsing template: the template is %d bytes, more than the %d a chat template may have", len(source), MaxTemplateBytes)
	}
	defer func() {
		if r := recover(); r != nil {
			tmpl, err = nil, fmt.Errorf("chat: parsing template: engine failure: %v", r)
		}
	}()
	t, err := jinja.Compile(prepareSource(source))
	if err != nil {
		return nil, fmt.Errorf("chat: parsing template: %w", err)
	}
	return &Template{tmpl: t, source: source, specials: map[string]string{}}, nil
}

// Source returns the template text as given to ParseTemplate.
func (t *Template) Source() string { return t.source }

// LoadTemplate reads a model directory's chat template, taking the first
// of chat_template.jinja, chat_template.json and the chat_template field of
// tokenizer_config.json (a string, or a list of named templates of which
// "default" is used). Special tokens come from tokenizer_config.json.
func LoadTemplate(modelDir string) (*Template, error) {
	cfgPath := filepath.Join(modelDir, "tokenizer_config.json")
	var cfg map[string]json.RawMessage
	cfgData, err := regularfile.Read(cfgPath, maxConfigBytes)
	switch {
	case err == nil:
		if err := json.Unmarshal(cfgData, &cfg); err != nil {
			return nil, fmt.Errorf("chat: decoding %s: %w", cfgPath, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("chat: reading tokenizer config: %w", err)
	}

	source, from, err := findTemplateSource(modelDir, cfg)
	if err != nil {
		return nil, err
	}
	t, err := ParseTemplate(source)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	for _, name := range []string{"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"} {
		raw, ok := cfg[name]
		if !ok {
			continue
		}
		tok, err := specialToken(raw)
		if err != nil {
			return nil, fmt.Errorf("chat: %s field %s: %w", cfgPath, name, err)
		}
		if tok != "" {
			t.specials[name] = tok
		}
	}
	return t, nil
}

// ErrNoTemplate is wrapped by LoadTemplate's error when the model ships no
// chat template at all.
var ErrNoTemplate = errors.New("chat: no chat template")

func findTemplateSource(modelDir string, cfg map[string]json.RawMessage) (source, from string, err error) {
	jinjaPath := filepath.Join(modelDir, "chat_template.jinja")
	data, err := regularfile.Read(jinjaPath, MaxTemplateBytes)
	if err == nil {
		return string(data), jinjaPath, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("chat: reading template: %w", err)
	}

	jsonPath := filepath.Join(modelDir, "chat_template.json")
	data, err = regularfile.Read(jsonPath, maxConfigBytes)
	if err == nil {
		var f map[string]json.RawMessage
		if err := json.Unmarshal(data, &f); err != nil {
			return "", "", fmt.Errorf("chat: decoding %s: %w", jsonPath, err)
		}
		src, err := templateField(f["chat_template"])
		if err != nil {
			return "", "", fmt.Errorf("chat: %s field chat_template: %w", jsonPath, err)
		}
		return src, jsonPath, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("chat: reading template: %w", err)
	}

	cfgPath := filepath.Join(modelDir, "tokenizer_config.json")
	raw, ok := cfg["chat_template"]
	if !ok {
		return "", "", fmt.Errorf("%w in %s: none of chat_template.jinja, chat_template.json or a chat_template field in tokenizer_config.json", ErrNoTemplate, modelDir)
	}
	src, err := templateField(raw)
	if err != nil {
		return "", "", fmt.Errorf("chat: %s field chat_template: %w", cfgPath, err)
	}
	return src, cfgPath, nil
}

// templateField decodes a chat_template field: a string, or a list of
// {"name", "template"} objects of which "default" is used.
func templateField(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", errors.New("missing")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("expected a string or a list of named templates: %w", err)
	}
	names := make([]string, 0, len(named))
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
		names = append(names, n.Name)
	}
	return "", fmt.Errorf("no template named \"default\" among %q", names)
}

// specialToken decodes a special-token field: a string, null, or an
// AddedToken object with a "content" field.
func specialToken(raw json.RawMessage) (string, error) {
	var s *string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == nil {
			return "", nil
		}
		return *s, nil
	}
	var tok struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &tok); err != nil {
		return "", fmt.Errorf("expected a string or an object with content: %w", err)
	}
	return tok.Content, nil
}

// Render renders the conversation as transformers' apply_chat_template
// does with tokenize=False, within opts.Limits.
func (t *Template) Render(msgs []Message, opts Options) (string, error) {
	return t.RenderContext(context.Background(), msgs, opts)
}

// RenderContext is Render stopping when ctx ends.
func (t *Template) RenderContext(ctx context.Context, msgs []Message, opts Options) (out string, err error) {
	lim := opts.Limits
	if lim.MaxOutput <= 0 {
		lim.MaxOutput = DefaultLimits.MaxOutput
	}
	vars := make(map[string]jinja.Value, len(opts.Extra)+len(t.specials)+8)
	for k, v := range opts.Extra {
		val, err := goValue(v, false)
		if err != nil {
			return "", fmt.Errorf("chat: template variable %s: %w", k, err)
		}
		vars[k] = val
	}
	for k, v := range t.specials {
		vars[k] = jinja.NewString(v)
	}

	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		v, err := messageValue(m)
		if err != nil {
			return "", fmt.Errorf("chat: message %d: %w", i, err)
		}
		list[i] = v
	}
	vars["messages"] = jinja.NewList(list)

	vars["tools"] = jinja.None()
	if len(opts.Tools) > 0 {
		tools := make([]jinja.Value, len(opts.Tools))
		for i, tool := range opts.Tools {
			v, err := goValue(tool, false)
			if err != nil {
				return "", fmt.Errorf("chat: tool %d: %w", i, err)
			}
			tools[i] = v
		}
		vars["tools"] = jinja.NewList(tools)
	}
	if _, ok := vars["documents"]; !ok {
		vars["documents"] = jinja.None()
	}
	vars["add_generation_prompt"] = jinja.NewBool(opts.AddGenerationPrompt)
	if opts.EnableThinking != nil {
		vars["enable_thinking"] = jinja.NewBool(*opts.EnableThinking)
	}
	vars["raise_exception"] = jinja.NewCallable("raise_exception", raiseException)
	vars[tojsonName] = jinja.NewCallable(tojsonName, tojsonFilter(lim.MaxOutput))

	// The engine indexes values with unchecked type assertions in a few
	// places; a template that trips one must not take the server down.
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat: rendering template: engine failure: %v", r)
		}
	}()
	out, err = t.tmpl.RenderContext(ctx, vars, lim)
	if err != nil {
		return "", fmt.Errorf("chat: rendering template: %w", err)
	}
	return out, nil
}

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Value{}, &RaisedError{Message: "(no message)"}
	}
	v := args[0]
	msg := v.String()
	if v.IsString() {
		msg = v.AsString()
	}
	return jinja.Value{}, &RaisedError{Message: msg}
}
