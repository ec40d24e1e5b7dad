package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ardanlabs/jinja"
)

// The engine is github.com/ardanlabs/jinja, which follows Hugging Face's
// environment (trim_blocks, lstrip_blocks, loop controls, Python string
// and dict methods, namespace, raise_exception, strftime_now). This file
// adds what transformers does around it:
//   - keep_trailing_newline=False: one trailing newline of the source is
//     dropped;
//   - the tojson filter is json.dumps(x, ensure_ascii=False, indent=None,
//     separators=None, sort_keys=False) with those keyword arguments; the
//     engine's built-in filter cannot be replaced, so filter uses of
//     "tojson" in the source are renamed to tojsonName, which Render binds;
//   - raise_exception surfaces as a *RaisedError;
//   - the tokenizer's special tokens (bos_token, eos_token, ...) are
//     template variables, and tools and documents default to None.

// tojsonName is the filter name that tojson uses are renamed to.
const tojsonName = "spool_tojson"

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
	defer func() {
		if r := recover(); r != nil {
			tmpl, err = nil, fmt.Errorf("chat: parsing template: engine failure: %v", r)
		}
	}()
	src := source
	switch {
	case strings.HasSuffix(src, "\r\n"):
		src = src[:len(src)-2]
	case strings.HasSuffix(src, "\n"), strings.HasSuffix(src, "\r"):
		src = src[:len(src)-1]
	}
	t, err := jinja.Compile(renameTojson(src))
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
	cfgData, err := os.ReadFile(cfgPath)
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

func findTemplateSource(modelDir string, cfg map[string]json.RawMessage) (source, from string, err error) {
	jinjaPath := filepath.Join(modelDir, "chat_template.jinja")
	data, err := os.ReadFile(jinjaPath)
	if err == nil {
		return string(data), jinjaPath, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("chat: reading template: %w", err)
	}

	jsonPath := filepath.Join(modelDir, "chat_template.json")
	data, err = os.ReadFile(jsonPath)
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
		return "", "", fmt.Errorf("chat: no chat template in %s: none of chat_template.jinja, chat_template.json or a chat_template field in tokenizer_config.json", modelDir)
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
// does with tokenize=False.
func (t *Template) Render(msgs []Message, opts Options) (out string, err error) {
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
	vars[tojsonName] = jinja.NewCallable(tojsonName, tojsonFilter)

	// The engine indexes values with unchecked type assertions in a few
	// places; a template that trips one must not take the server down.
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat: rendering template: engine failure: %v", r)
		}
	}()
	out, err = t.tmpl.RenderValues(vars)
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

// renameTojson renames the tojson filter in every expression and statement
// tag of src to tojsonName, leaving text, comments, raw blocks and string
// literals alone.
func renameTojson(src string) string {
	var b strings.Builder
	b.Grow(len(src))
	i := 0
	for {
		j := strings.IndexByte(src[i:], '{')
		if j < 0 || i+j+1 >= len(src) {
			b.WriteString(src[i:])
			return b.String()
		}
		j += i
		var closer string
		switch src[j+1] {
		case '{':
			closer = "}}"
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		default:
			b.WriteString(src[i : j+1])
			i = j + 1
			continue
		}
		b.WriteString(src[i:j])
		if closer == "#}" {
			k := strings.Index(src[j+2:], closer)
			if k < 0 {
				b.WriteString(src[j:])
				return b.String()
			}
			end := j + 2 + k + 2
			b.WriteString(src[j:end])
			i = end
			continue
		}
		end := tagEnd(src, j+2, closer)
		if end < 0 {
			b.WriteString(src[j:])
			return b.String()
		}
		tag := src[j:end]
		if closer == "%}" && stmtWord(tag) == "raw" {
			k := rawEnd(src, end)
			b.WriteString(src[j:k])
			i = k
			continue
		}
		b.WriteString(renameInTag(tag))
		i = end
	}
}

// tagEnd returns the index just past the closer of a tag whose body starts
// at start, skipping quoted strings, or -1.
func tagEnd(src string, start int, closer string) int {
	for k := start; k < len(src); k++ {
		switch c := src[k]; {
		case c == '\'' || c == '"':
			for k++; k < len(src) && src[k] != c; k++ {
				if src[k] == '\\' {
					k++
				}
			}
		case strings.HasPrefix(src[k:], closer):
			return k + len(closer)
		}
	}
	return -1
}

// stmtWord returns the first word of a {% %} tag.
func stmtWord(tag string) string {
	body := strings.TrimPrefix(tag[2:], "-")
	body = strings.TrimLeft(body, " \t\r\n")
	end := strings.IndexFunc(body, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	if end < 0 {
		return body
	}
	return body[:end]
}

// rawEnd returns the index just past the {% endraw %} tag following pos,
// or len(src).
func rawEnd(src string, pos int) int {
	for pos < len(src) {
		j := strings.Index(src[pos:], "{%")
		if j < 0 {
			return len(src)
		}
		j += pos
		end := tagEnd(src, j+2, "%}")
		if end < 0 {
			return len(src)
		}
		if stmtWord(src[j:end]) == "endraw" {
			return end
		}
		pos = j + 2
	}
	return len(src)
}

// renameInTag rewrites "| tojson" outside string literals in one tag.
func renameInTag(tag string) string {
	if !strings.Contains(tag, "tojson") {
		return tag
	}
	var b strings.Builder
	for k := 0; k < len(tag); k++ {
		c := tag[k]
		switch {
		case c == '\'' || c == '"':
			start := k
			for k++; k < len(tag) && tag[k] != c; k++ {
				if tag[k] == '\\' {
					k++
				}
			}
			b.WriteString(tag[start:min(k+1, len(tag))])
		case c == '|':
			b.WriteByte(c)
			n := k + 1
			for n < len(tag) && (tag[n] == ' ' || tag[n] == '\t' || tag[n] == '\n' || tag[n] == '\r') {
				n++
			}
			b.WriteString(tag[k+1 : n])
			if strings.HasPrefix(tag[n:], "tojson") && !isIdentByte(tag, n+len("tojson")) {
				b.WriteString(tojsonName)
				k = n + len("tojson") - 1
			} else {
				k = n - 1
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isIdentByte(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
