package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sharedfixtures "github.com/spoolhq/spool/internal/fixtures"
)

// fixturesDir returns ../shared/fixtures relative to the module root, or
// skips the test when it is absent.
func fixturesDir(t testing.TB) string {
	t.Helper()
	return sharedfixtures.Root(t)
}

type templateCase struct {
	Template       string    `json:"template"`
	Conversation   string    `json:"conversation"`
	EnableThinking *bool     `json:"enable_thinking"`
	Tools          bool      `json:"tools"`
	Messages       []Message `json:"messages"`
	Rendered       string    `json:"rendered"`
}

type templateCases struct {
	Tools []Tool         `json:"tools"`
	Cases []templateCase `json:"cases"`
}

func loadTemplateCases(t testing.TB) (string, templateCases) {
	t.Helper()
	dir := filepath.Join(fixturesDir(t), "templates")
	data, err := os.ReadFile(filepath.Join(dir, "chat-template-cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases templateCases
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("decoding chat-template-cases.json: %v", err)
	}
	if len(cases.Cases) == 0 {
		t.Fatal("chat-template-cases.json holds no cases")
	}
	return dir, cases
}

func (c templateCase) name() string {
	think := "default"
	if c.EnableThinking != nil {
		think = map[bool]string{true: "think", false: "nothink"}[*c.EnableThinking]
	}
	return c.Template + "/" + c.Conversation + "/" + think
}

func TestRenderFixtureCases(t *testing.T) {
	dir, cases := loadTemplateCases(t)
	templates := map[string]*Template{}
	for _, c := range cases.Cases {
		t.Run(c.name(), func(t *testing.T) {
			tmpl, ok := templates[c.Template]
			if !ok {
				src, err := os.ReadFile(filepath.Join(dir, c.Template+".jinja"))
				if err != nil {
					t.Fatal(err)
				}
				tmpl, err = ParseTemplate(string(src))
				if err != nil {
					t.Fatal(err)
				}
				templates[c.Template] = tmpl
			}
			opts := Options{AddGenerationPrompt: true, EnableThinking: c.EnableThinking}
			if c.Tools {
				opts.Tools = cases.Tools
			}
			got, err := tmpl.Render(c.Messages, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.Rendered {
				t.Errorf("rendered prompt differs\n got %q\nwant %q", got, c.Rendered)
			}
		})
	}
}

// TestLoadTemplateMini loads the mini model's template from its
// tokenizer_config.json and checks it is the fixture chat template.
func TestLoadTemplateMini(t *testing.T) {
	fx := fixturesDir(t)
	tmpl, err := LoadTemplate(filepath.Join(fx, "glm52-mini"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(fx, "templates", "fixture-chat.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimRight(tmpl.Source(), "\n") != strings.TrimRight(string(want), "\n") {
		t.Errorf("glm52-mini template differs from templates/fixture-chat.jinja")
	}
	if got := tmpl.specials["eos_token"]; got != "<|endoftext|>" {
		t.Errorf("eos_token = %q, want <|endoftext|>", got)
	}
}

func TestLoadTemplateSources(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    string
		wantErr string
	}{
		{
			name: "jinja file wins",
			files: map[string]string{
				"chat_template.jinja":   "A{{ bos_token }}",
				"tokenizer_config.json": `{"chat_template": "B", "bos_token": {"content": "<s>", "special": true}}`,
			},
			want: "A<s>",
		},
		{
			name:  "json file",
			files: map[string]string{"chat_template.json": `{"chat_template": "J{{ messages|length }}"}`},
			want:  "J1",
		},
		{
			name:  "named templates",
			files: map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ eos_token }}"}], "eos_token": "</s>"}`},
			want:  "D</s>",
		},
		{
			name:    "no template",
			files:   map[string]string{"tokenizer_config.json": `{"eos_token": "</s>"}`},
			wantErr: "no chat template",
		},
		{
			name:    "no default among named",
			files:   map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "rag", "template": "R"}]}`},
			wantErr: `no template named "default"`,
		},
		{
			name:    "bad config",
			files:   map[string]string{"tokenizer_config.json": `{"chat_template": `},
			wantErr: "tokenizer_config.json",
		},
		{
			name:    "syntax error names file",
			files:   map[string]string{"chat_template.jinja": "{% if %}"},
			wantErr: "chat_template.jinja",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tmpl, err := LoadTemplate(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("rendered %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseTemplateSyntaxError(t *testing.T) {
	tests := []struct{ src, want string }{
		{"{% if messages %}unclosed", "if"},
		{"text\n{{ messages | }}", "line 2"},
		{"{{ (1 }}", `expected ")"`},
		{"{% if x %}{% endfor %}", "endfor"},
		{"{% for %}", "in"},
		{"{% frobnicate %}", "frobnicate"},
	}
	for _, tt := range tests {
		_, err := ParseTemplate(tt.src)
		if err == nil {
			t.Errorf("ParseTemplate(%q) succeeded, want a syntax error", tt.src)
			continue
		}
		if !strings.Contains(err.Error(), "parsing template") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTemplate(%q) error %q, want one naming %q", tt.src, err, tt.want)
		}
	}
}

func TestRenderRaiseException(t *testing.T) {
	tmpl, err := ParseTemplate(`{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('Role ' + m.role + ' is not supported') }}{% endif %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render([]Message{{Role: "user", Content: "a"}, {Role: "robot", Content: "b"}}, Options{})
	var raised *RaisedError
	if !errors.As(err, &raised) {
		t.Fatalf("error = %v, want a *RaisedError", err)
	}
	if raised.Message != "Role robot is not supported" {
		t.Errorf("message = %q", raised.Message)
	}
	if !strings.Contains(err.Error(), "Role robot is not supported") {
		t.Errorf("error text %q does not name the message", err)
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		msgs []Message
		opts Options
	}{
		{"items on a string", `{% for k, v in messages[0].content | items %}{% endfor %}`, []Message{{Role: "user", Content: "x"}}, Options{}},
		{"unknown filter", `{{ messages | frobnicate }}`, nil, Options{}},
		{"bad content type", `{{ messages }}`, []Message{{Role: "user", Content: 42i}}, Options{}},
		{"bad extra", `{{ x }}`, nil, Options{Extra: map[string]any{"x": make(chan int)}}},
		{"tojson unknown keyword", `{{ messages | tojson(colour=1) }}`, nil, Options{}},
		{"tojson bad separators", `{{ messages | tojson(separators=1) }}`, nil, Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			if out, err := tmpl.Render(tt.msgs, tt.opts); err == nil {
				t.Errorf("Render succeeded with %q, want an error", out)
			}
		})
	}
}

// TestRenderVariables checks the variables a template sees and the
// Python-compatible behaviours added around the engine. The expected
// strings were produced by Jinja2 3.1 with transformers' environment.
func TestRenderVariables(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name string
		src  string
		msgs []Message
		opts Options
		want string
	}{
		{"trailing newline dropped", "x\n", nil, Options{}, "x"},
		{"only one trailing newline dropped", "x\n\n", nil, Options{}, "x\n"},
		{"enable_thinking undefined", "{{ enable_thinking is defined }}", nil, Options{}, "False"},
		{"enable_thinking true", "{{ enable_thinking }}", nil, Options{EnableThinking: &yes}, "True"},
		{"enable_thinking false", "{{ enable_thinking }}", nil, Options{EnableThinking: &no}, "False"},
		{"enable_thinking from extra", "{{ enable_thinking }}", nil, Options{Extra: map[string]any{"enable_thinking": false}}, "False"},
		{"option beats extra", "{{ enable_thinking }}", nil, Options{EnableThinking: &yes, Extra: map[string]any{"enable_thinking": false}}, "True"},
		{"extra kwargs", "{{ reasoning_effort }}", nil, Options{Extra: map[string]any{"reasoning_effort": "high"}}, "high"},
		{"tools none", "{{ tools is none }}{{ documents is none }}", nil, Options{}, "TrueTrue"},
		{"add_generation_prompt", "{{ add_generation_prompt }}", nil, Options{AddGenerationPrompt: true}, "True"},
		{"null content is empty", "[{{ messages[0].content }}]", []Message{{Role: "assistant"}}, Options{}, "[]"},
		{"absent fields undefined", "{{ messages[0].reasoning_content is defined }}{{ messages[0].tool_calls is defined }}", []Message{{Role: "user", Content: "a"}}, Options{}, "FalseFalse"},
		{"parts", "{% for p in messages[0].content %}{{ p.type }}:{{ p.text }};{% endfor %}", []Message{{Role: "user", Content: []ContentPart{{Type: "text", Text: "a"}, {Type: "image_url"}}}}, Options{}, "text:a;image_url:;"},
		{
			"string arguments become an ordered dict",
			"{% for k, v in messages[0].tool_calls[0].function.arguments.items() %}{{ k }}={{ v | tojson }};{% endfor %}",
			[]Message{{Role: "assistant", ToolCalls: []ToolCall{{ID: "c", Function: FunctionCall{Name: "f", Arguments: `{"z": 1, "a": [1.5, "é"], "m": {"y": null, "b": true}}`}}}}},
			Options{}, `z=1;a=[1.5, "é"];m={"y": null, "b": true};`,
		},
		{
			"non-object string arguments stay a string",
			"{{ messages[0].tool_calls[0].function.arguments }}",
			[]Message{{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: "not json"}}}}},
			Options{}, "not json",
		},
		{
			"map arguments",
			"{{ messages[0].tool_calls[0].function.arguments | tojson }}|{{ messages[0].tool_calls[0].type }}",
			[]Message{{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f", Arguments: map[string]any{"n": float64(3), "x": 0.25}}}}}},
			Options{}, `{"n": 3, "x": 0.25}|function`,
		},
		{"tojson default", `{{ x | tojson }}`, nil, Options{Extra: map[string]any{"x": json.RawMessage(`{"b": 1, "a": [1.0, "x<y&é\u2028\n\u0001"], "c": 1e-7, "d": 1234567.0, "e": 1e16}`)}}, `{"b": 1, "a": [1.0, "x<y&é` + "\u2028" + `\n\u0001"], "c": 1e-07, "d": 1234567.0, "e": 1e+16}`},
		{"tojson ensure_ascii", `{{ x | tojson(ensure_ascii=True) }}`, nil, Options{Extra: map[string]any{"x": "é🚀\x7f"}}, `"\u00e9\ud83d\ude80\u007f"`},
		{"tojson positional ensure_ascii", `{{ x | tojson(true) }}`, nil, Options{Extra: map[string]any{"x": "é"}}, `"\u00e9"`},
		{"tojson indent", `{{ x | tojson(indent=2) }}`, nil, Options{Extra: map[string]any{"x": json.RawMessage(`{"b": 1, "a": [1, {}], "c": []}`)}}, "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    {}\n  ],\n  \"c\": []\n}"},
		{"tojson indent string", `{{ x | tojson(indent="\t") }}`, nil, Options{Extra: map[string]any{"x": []any{"a"}}}, "[\n\t\"a\"\n]"},
		{"tojson separators and sort_keys", `{{ x | tojson(separators=(',', ':'), sort_keys=true) }}`, nil, Options{Extra: map[string]any{"x": json.RawMessage(`{"b": 1, "a": null}`)}}, `{"a":null,"b":1}`},
		{"tojson in set and macro", `{% macro j(v) %}{{ v|tojson }}{% endmacro %}{% set s = x |  tojson %}{{ s }}{{ j(x) }}`, nil, Options{Extra: map[string]any{"x": json.RawMessage(`{"k": "v"}`)}}, `{"k": "v"}{"k": "v"}`},
		{"tojson in string literal untouched", `{{ "a | tojson" }}{# x | tojson #}`, nil, Options{}, "a | tojson"},
		{"raw block untouched", `{% raw %}{{ x | tojson }}{% endraw %}`, nil, Options{}, "{{ x | tojson }}"},
		{"tool key order", `{{ tools[0] | tojson }}`, nil, Options{Tools: []Tool{{"function": map[string]any{"parameters": map[string]any{"required": []any{"type"}, "properties": map[string]any{"type": map[string]any{"description": "d", "type": "string"}, "a": map[string]any{"type": "integer"}}, "type": "object"}, "description": "D", "name": "f", "strict": true}, "type": "function"}}}, `{"type": "function", "function": {"name": "f", "description": "D", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "type": {"type": "string", "description": "d"}}, "required": ["type"]}, "strict": true}}`},
		{"loop controls and namespace", `{% set ns = namespace(n=0) %}{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}`, nil, Options{}, "2"},
		{"string methods", `{{ ' a/b '.strip().split('/')[-1] }}{{ 'xy'.startswith('x') }}{{ 'xy\n'.rstrip('\n').endswith('y') }}{{ '\nq'.lstrip() }}`, nil, Options{}, "bTrueTrueq"},
		{"items filter", `{% for k, v in x | items %}{{ k }}{{ v }}{% endfor %}`, nil, Options{Extra: map[string]any{"x": json.RawMessage(`{"b": 1, "a": 2}`)}}, "b1a2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(tt.msgs, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestMessageJSON(t *testing.T) {
	const in = `[
		{"role": "system", "content": "s"},
		{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]},
		{"role": "assistant", "content": null, "reasoning_content": "r", "tool_calls": [
			{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": 2}"}},
			{"id": "call_2", "type": "function", "function": {"name": "g", "arguments": {"y": true, "x": null}}}]},
		{"role": "tool", "tool_call_id": "call_1", "name": "f", "content": "ok"}
	]`
	var msgs []Message
	if err := json.Unmarshal([]byte(in), &msgs); err != nil {
		t.Fatal(err)
	}
	if msgs[0].Content != "s" {
		t.Errorf("system content = %#v", msgs[0].Content)
	}
	parts, ok := msgs[1].Content.([]ContentPart)
	if !ok || len(parts) != 2 || parts[0] != (ContentPart{Type: "text", Text: "a"}) || parts[1].Type != "image_url" {
		t.Errorf("user content = %#v", msgs[1].Content)
	}
	a := msgs[2]
	if a.Content != nil || a.ReasoningContent != "r" || len(a.ToolCalls) != 2 {
		t.Fatalf("assistant = %#v", a)
	}
	if a.ToolCalls[0].Function.Arguments != `{"b": 1, "a": 2}` {
		t.Errorf("string arguments = %#v", a.ToolCalls[0].Function.Arguments)
	}
	if raw, ok := a.ToolCalls[1].Function.Arguments.(json.RawMessage); !ok || string(raw) != `{"y": true, "x": null}` {
		t.Errorf("object arguments = %#v", a.ToolCalls[1].Function.Arguments)
	}
	if msgs[3].ToolCallID != "call_1" || msgs[3].Name != "f" {
		t.Errorf("tool message = %#v", msgs[3])
	}

	tmpl, err := ParseTemplate(`{% for m in messages %}{% for tc in m.tool_calls or [] %}{{ tc.function.arguments | tojson }}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(msgs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"b": 1, "a": 2}{"y": true, "x": null}`; got != want {
		t.Errorf("arguments rendered %q, want %q", got, want)
	}

	for _, bad := range []string{
		`{"role": "user", "content": 5}`,
		`{"role": "user", "content": [1]}`,
		`{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": [1]}}]}`,
		`{"role": 1}`,
	} {
		var m Message
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("decoding %s succeeded, want an error", bad)
		}
	}
}

// FuzzTemplate checks that parsing and rendering arbitrary templates and
// message text returns errors rather than panicking.
func FuzzTemplate(f *testing.F) {
	f.Add("{% for m in messages %}{{ m.content | tojson }}{% endfor %}", "hi")
	f.Add("{{ messages[0].content.split('</think>')[-1].strip() }}", "a</think> b")
	f.Add("{% set ns = namespace(x=1) %}{{ ns.x + messages|length }}", "")
	f.Add("{{ (messages[0].content|tojson(indent=2)).startswith('\"') }}{% raw %}{{{% endraw %}", "\x00é")
	f.Fuzz(func(t *testing.T, src, content string) {
		tmpl, err := ParseTemplate(src)
		if err != nil {
			return
		}
		_, _ = tmpl.Render([]Message{{Role: "user", Content: content}}, Options{AddGenerationPrompt: true})
	})
}

// TestJinja2Whitespace renders templates whose expected output was
// produced by Jinja2 3.1.6 in transformers' environment (trim_blocks,
// lstrip_blocks, loop controls); see testdata/jinja2-whitespace.json.
func TestJinja2Whitespace(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "jinja2-whitespace.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Template string `json:"template"`
		Rendered string `json:"rendered"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		tmpl, err := ParseTemplate(c.Template)
		if err != nil {
			t.Errorf("ParseTemplate(%q): %v", c.Template, err)
			continue
		}
		got, err := tmpl.Render(nil, Options{})
		if err != nil {
			t.Errorf("Render(%q): %v", c.Template, err)
			continue
		}
		if got != c.Rendered {
			t.Errorf("template %q\n got %q\nwant %q", c.Template, got, c.Rendered)
		}
	}
}

// BenchmarkRender renders the GLM-4.6 fixture's tool conversation.
func BenchmarkRender(b *testing.B) {
	dir, cases := loadTemplateCases(b)
	tmpl := parseTemplateFile(b, filepath.Join(dir, "glm-4.6.jinja"))
	var c templateCase
	for _, tc := range cases.Cases {
		if tc.Template == "glm-4.6" && tc.Tools {
			c = tc
			break
		}
	}
	opts := Options{Tools: cases.Tools, AddGenerationPrompt: true}
	b.SetBytes(int64(len(c.Rendered)))
	for b.Loop() {
		if _, err := tmpl.Render(c.Messages, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// parseTemplateFile parses one template file for a test.
func parseTemplateFile(t testing.TB, path string) *Template {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := ParseTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}
