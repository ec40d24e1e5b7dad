package glm

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/internal/fixtures"
)

func testTools(t testing.TB) []chat.Tool {
	t.Helper()
	const src = `[
		{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
			"properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "hot": {"type": "boolean"},
				"temp": {"type": "number"}, "tags": {"type": "array"}, "opts": {"type": "object"},
				"note": {"type": ["string", "null"]}, "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
			"required": ["city"]}}},
		{"type": "function", "function": {"name": "list_files", "parameters": {"type": "object", "properties": {}}}},
		{"name": "flat.tool", "parameters": {"properties": {"n": {"type": "integer"}}}}
	]`
	var tools []chat.Tool
	if err := json.Unmarshal([]byte(src), &tools); err != nil {
		t.Fatal(err)
	}
	return tools
}

func TestParseToolCalls(t *testing.T) {
	tools := testTools(t)
	type call struct{ name, args string }
	tests := []struct {
		name        string
		text        string
		wantContent string
		wantCalls   []call
		wantErr     bool
	}{
		{
			name:      "glm-5 compact",
			text:      "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>2</arg_value></tool_call>",
			wantCalls: []call{{"get_weather", `{"city":"Paris","days":2}`}},
		},
		{
			name:        "glm-4.6 newlines and content",
			text:        "Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich</arg_value>\n</tool_call>\n<tool_call>list_files\n</tool_call>",
			wantContent: "Checking.",
			wantCalls:   []call{{"get_weather", `{"city":"Zürich"}`}, {"list_files", `{}`}},
		},
		{
			name:      "string keeps raw text",
			text:      `<tool_call>get_weather<arg_key>city</arg_key><arg_value> 42 </arg_value><arg_key>note</arg_key><arg_value>null</arg_value></tool_call>`,
			wantCalls: []call{{"get_weather", `{"city":" 42 ","note":"null"}`}},
		},
		{
			name:      "typed values parsed",
			text:      `<tool_call>get_weather<arg_key>hot</arg_key><arg_value>true</arg_value><arg_key>temp</arg_key><arg_value> 21.50 </arg_value><arg_key>tags</arg_key><arg_value>["a", "b"]</arg_value><arg_key>opts</arg_key><arg_value>{"x": {"y": 1}}</arg_value><arg_key>limit</arg_key><arg_value>5</arg_value></tool_call>`,
			wantCalls: []call{{"get_weather", `{"hot":true,"temp":21.50,"tags":["a","b"],"opts":{"x":{"y":1}},"limit":5}`}},
		},
		{
			name:      "numbers refuse booleans",
			text:      `<tool_call>get_weather<arg_key>days</arg_key><arg_value>true</arg_value><arg_key>temp</arg_key><arg_value>false</arg_value></tool_call>`,
			wantCalls: []call{{"get_weather", `{"days":"true","temp":"false"}`}},
		},
		{
			name:      "invalid JSON stays a string",
			text:      `<tool_call>get_weather<arg_key>days</arg_key><arg_value>two</arg_value><arg_key>tags</arg_key><arg_value>[a, b]</arg_value></tool_call>`,
			wantCalls: []call{{"get_weather", `{"days":"two","tags":"[a, b]"}`}},
		},
		{
			name:      "undeclared tool and key read as JSON",
			text:      `<tool_call>other.fn-2<arg_key> n </arg_key><arg_value>7</arg_value><arg_key>s</arg_key><arg_value>hi</arg_value></tool_call>`,
			wantCalls: []call{{"other.fn-2", `{"n":7,"s":"hi"}`}},
		},
		{
			name:      "flat tool definition",
			text:      `<tool_call>flat.tool<arg_key>n</arg_key><arg_value>true</arg_value></tool_call>`,
			wantCalls: []call{{"flat.tool", `{"n":"true"}`}},
		},
		{
			name:      "escaping",
			text:      "<tool_call>get_weather<arg_key>city</arg_key><arg_value>a \"b\" <c> & \\d\n</arg_value></tool_call>",
			wantCalls: []call{{"get_weather", `{"city":"a \"b\" <c> & \\d\n"}`}},
		},
		{
			name:      "duplicate key keeps first place and last value",
			text:      `<tool_call>get_weather<arg_key>city</arg_key><arg_value>A</arg_value><arg_key>days</arg_key><arg_value>1</arg_value><arg_key>city</arg_key><arg_value>B</arg_value></tool_call>`,
			wantCalls: []call{{"get_weather", `{"city":"B","days":1}`}},
		},
		{
			name:      "key without value skipped",
			text:      `<tool_call>get_weather<arg_key>days</arg_key>oops<arg_key>city</arg_key><arg_value>X</arg_value></tool_call>`,
			wantCalls: []call{{"get_weather", `{"city":"X"}`}},
		},
		{
			name:        "reasoning before first close is ignored",
			text:        "<tool_call>ignored</tool_call> thought</think>\nanswer<tool_call>list_files</tool_call>",
			wantContent: "answer",
			wantCalls:   []call{{"list_files", `{}`}},
		},
		{
			name:        "stray think tags removed",
			text:        "  a<think>b  ",
			wantContent: "ab",
		},
		{
			name:      "unclosed with a complete pair recovered",
			text:      `<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value><arg_key>days</arg_key><arg_val`,
			wantCalls: []call{{"get_weather", `{"city":"Rome"}`}},
		},
		{
			name:      "unclosed zero-arg tool recovered",
			text:      "<tool_call>list_files\n",
			wantCalls: []call{{"list_files", `{}`}},
		},
		{
			name: "unclosed without a pair dropped",
			text: `<tool_call>get_weather<arg_key>city</arg_key><arg_value>Ro`,
		},
		{
			name: "unclosed unknown name dropped",
			text: `<tool_call>nope`,
		},
		{
			name:        "unclosed with extra text after zero-arg name dropped",
			text:        "Sure <tool_call>list_files please",
			wantContent: "Sure",
		},
		{
			name:        "closed without name is an error",
			text:        "x <tool_call> <arg_key>a</arg_key><arg_value>1</arg_value></tool_call> y <tool_call>list_files</tool_call>",
			wantContent: "x  y",
			wantCalls:   []call{{"list_files", `{}`}},
			wantErr:     true,
		},
		{
			name:        "no calls",
			text:        "\n  plain answer \n",
			wantContent: "plain answer",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls, err := ParseToolCalls(tt.text, tools)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if content != tt.wantContent {
				t.Errorf("content = %q, want %q", content, tt.wantContent)
			}
			var got []call
			for _, c := range calls {
				got = append(got, call{c.Name, c.Arguments})
			}
			if len(got) != len(tt.wantCalls) {
				t.Fatalf("calls = %q, want %q", got, tt.wantCalls)
			}
			for i := range got {
				if got[i] != tt.wantCalls[i] {
					t.Errorf("call %d = %q, want %q", i, got[i], tt.wantCalls[i])
				}
			}
		})
	}
}

func TestNewCallID(t *testing.T) {
	id, err := NewCallID(bytes.NewReader(bytes.Repeat([]byte{0xab, 0x01}, 6)))
	if err != nil {
		t.Fatal(err)
	}
	if id != "call_ab01ab01ab01ab01ab01ab01" {
		t.Errorf("id = %q", id)
	}
	if _, err := NewCallID(bytes.NewReader([]byte{1, 2})); err == nil {
		t.Error("short random source gave no error")
	}
	if _, err := NewCallID(iotest.ErrReader(errors.New("boom"))); err == nil {
		t.Error("failing random source gave no error")
	}
	call := ParsedCall{Name: "f", Arguments: `{"a":1}`}.ToolCall(id)
	if call.ID != id || call.Type != "function" || call.Function.Name != "f" || call.Function.Arguments != `{"a":1}` {
		t.Errorf("ToolCall = %#v", call)
	}
}

// TestToolCallRoundTrip renders an assistant turn holding parsed calls
// with the GLM-4.6 fixture template and parses the rendered markup back.
func TestToolCallRoundTrip(t *testing.T) {
	dir := fixtures.Path(t, "templates")
	tmpl := parseTemplateFile(t, filepath.Join(dir, "glm-4.6.jinja"))
	tools := templateTools(t, dir)
	want := []ParsedCall{
		{Name: "get_weather", Arguments: `{"city":"Paris","days":2}`},
		{Name: "list_files", Arguments: `{}`},
	}
	msg := chat.Message{Role: "assistant", Content: "Let me check."}
	for i, c := range want {
		msg.ToolCalls = append(msg.ToolCalls, c.ToolCall("call_"+strings.Repeat("0", 23)+string(rune('0'+i))))
	}
	out, err := tmpl.Render([]chat.Message{{Role: "user", Content: "q"}, msg}, chat.Options{Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	reply := out[strings.LastIndex(out, "<|assistant|>")+len("<|assistant|>"):]
	content, calls, err := ParseToolCalls(reply, tools)
	if err != nil {
		t.Fatal(err)
	}
	if content != "Let me check." {
		t.Errorf("content = %q", content)
	}
	if len(calls) != len(want) || calls[0] != want[0] || calls[1] != want[1] {
		t.Errorf("calls = %#v, want %#v", calls, want)
	}
}

// parseTemplateFile parses one template file for a test.
func parseTemplateFile(t testing.TB, path string) *chat.Template {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.ParseTemplate(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// templateTools are the tools of the fixture's template cases.
func templateTools(t testing.TB, dir string) []chat.Tool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "chat-template-cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases struct {
		Tools []chat.Tool `json:"tools"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases.Tools
}

var callName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func FuzzParseToolCalls(f *testing.F) {
	tools := testTools(f)
	f.Add("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>")
	f.Add("a</think>b<tool_call>list_files")
	f.Add("<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>[1,{\"a\":true}]</arg_value>\n</tool_call>")
	f.Add("<tool_call><tool_call>x</tool_call></tool_call><think>")
	f.Fuzz(func(t *testing.T, text string) {
		content, calls, err := ParseToolCalls(text, tools)
		content2, calls2, err2 := ParseToolCalls(text, tools)
		if content != content2 || len(calls) != len(calls2) || (err == nil) != (err2 == nil) {
			t.Fatal("ParseToolCalls is not deterministic")
		}
		if strings.TrimSpace(content) != content && strings.ToValidUTF8(content, "") == content {
			t.Errorf("content %q is not stripped", content)
		}
		for _, c := range calls {
			if !callName.MatchString(c.Name) {
				t.Errorf("call name %q is not a valid name", c.Name)
			}
			var args map[string]any
			if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
				t.Errorf("arguments %q are not a JSON object: %v", c.Arguments, err)
			}
		}
	})
}

// TestArgumentTypes: enum and const values, allOf members and $ref targets
// decide whether an argument is raw text, as grammar.CompileArguments does.
func TestArgumentTypes(t *testing.T) {
	var tools []chat.Tool
	src := `[{"type":"function","function":{"name":"f","parameters":{"type":"object",
		"properties":{"u":{"enum":["1","2"]},"n":{"const":3},"r":{"$ref":"#/$defs/s"},"a":{"allOf":[{"type":"string"}]},"d":{"$ref":"#/definitions/n"}},
		"required":["u","n"],
		"$defs":{"s":{"type":"string"}},"definitions":{"n":{"type":"integer"}}}}}]`
	if err := json.Unmarshal([]byte(src), &tools); err != nil {
		t.Fatal(err)
	}
	markup := "<tool_call>f<arg_key>u</arg_key><arg_value>1</arg_value><arg_key>n</arg_key><arg_value>3</arg_value>" +
		"<arg_key>r</arg_key><arg_value>7</arg_value><arg_key>a</arg_key><arg_value>8</arg_value><arg_key>d</arg_key><arg_value>9</arg_value></tool_call>"
	_, calls, err := ParseToolCalls(markup, tools)
	if err != nil || len(calls) != 1 {
		t.Fatalf("%v %v", calls, err)
	}
	if want := `{"u":"1","n":3,"r":"7","a":"8","d":9}`; calls[0].Arguments != want {
		t.Errorf("arguments %s, want %s", calls[0].Arguments, want)
	}
	if m := MissingArguments(calls[0], tools); len(m) != 0 {
		t.Errorf("missing %v", m)
	}
	if m := MissingArguments(ParsedCall{Name: "f", Arguments: `{"n":1}`}, tools); !slices.Equal(m, []string{"u"}) {
		t.Errorf("missing %v, want [u]", m)
	}
	if m := MissingArguments(ParsedCall{Name: "g", Arguments: `{}`}, tools); m != nil {
		t.Errorf("undeclared tool: missing %v", m)
	}
}
