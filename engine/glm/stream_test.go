package glm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/chat"
)

var streamTools = []chat.Tool{{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object",
	"properties": map[string]any{"n": map[string]any{"type": "integer"}, "s": map[string]any{"type": "string"}}}}}}

var requiredTools = []chat.Tool{{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object",
	"properties": map[string]any{"n": map[string]any{"type": "integer"}, "s": map[string]any{"type": "string"}}, "required": []any{"n", "s"}}}}}

// step is one call of Add and the piece it must return.
type step struct {
	text string
	end  End
	want Piece
}

func calls(cs ...ParsedCall) []ParsedCall { return cs }

// TestParserSteps: the pieces each step of a reply gives, as tables of
// streaming steps.
func TestParserSteps(t *testing.T) {
	cases := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{"plain text passes through", Options{}, []step{
			{"<think>a", More, Piece{Text: "<think>a"}},
			{" b</think>", Stop, Piece{Text: " b</think>"}},
		}},
		{"reasoning then text, a tag cut", Options{Chat: true, InThink: true}, []step{
			{"Two plus two", More, Piece{Reasoning: "Two plus two"}},
			{" is four.</th", More, Piece{Reasoning: " is four."}},
			{"ink>\n\nFour.", More, Piece{Text: "Four."}},
			{"  ", Stop, Piece{}},
		}},
		{"an opening think tag in the reply", Options{Chat: true}, []step{
			{"<think>hm</think>", More, Piece{Reasoning: "hm"}},
			{"yes", Stop, Piece{Text: "yes"}},
		}},
		{"a call between texts, whitespace dropped", Options{Chat: true, Tools: streamTools}, []step{
			{"Let me check.\n<tool_", More, Piece{Text: "Let me check."}},
			{"call>f<arg_key>n</arg_key><arg_value>3</arg_value></tool_call>\n", More, Piece{Calls: calls(ParsedCall{"f", `{"n":3}`})}},
			{" done", Stop, Piece{Text: "done"}},
		}},
		{"markup of an unknown shape stays text", Options{Chat: true, Tools: streamTools}, []step{
			{"<tool_call></tool_call>x", Stop, Piece{Text: "<tool_call></tool_call>x"}},
		}},
		{"no tools: markup is text", Options{Chat: true}, []step{
			{"<tool_call>f</tool_call>", Stop, Piece{Text: "<tool_call>f</tool_call>"}},
		}},
		{"stopped inside a call: salvaged", Options{Chat: true, Tools: streamTools}, []step{
			{"<tool_call>f<arg_key>s</arg_key><arg_value>abc</arg_value>", More, Piece{}},
			{"", Stop, Piece{Calls: calls(ParsedCall{"f", `{"s":"abc"}`})}},
		}},
		{"stopped inside a value: unforced is text", Options{Chat: true, Tools: streamTools}, []step{
			{"<tool_call>f<arg_key>s</arg_key><arg_value>abc", Stop, Piece{Text: "<tool_call>f<arg_key>s</arg_key><arg_value>abc"}},
		}},
		{"stopped inside a value: forced is closed", Options{Chat: true, Tools: streamTools, Forced: ForcedCall("f")}, []step{
			{"<arg_key>s</arg_key><arg_value>abc", Stop, Piece{Calls: calls(ParsedCall{"f", `{"s":"abc"}`})}},
		}},
		{"cut inside a call: dropped", Options{Chat: true, Tools: streamTools}, []step{
			{"ok <tool_call>f<arg_key>s</arg_key><arg_value>abc</arg_value>", Cut, Piece{Text: "ok"}},
		}},
		{"a salvaged call lacking a required argument is dropped", Options{Chat: true, Tools: requiredTools, Forced: ForcedCall("")}, []step{
			{"f<arg_key>s</arg_key><arg_value>abc</arg_value>", Stop, Piece{}},
		}},
		{"reasoning, then a forced call", Options{Chat: true, InThink: false, Tools: streamTools, Forced: ForcedCall("")}, []step{
			{"f<arg_key>n</arg_key><arg_value>1</arg_value></tool_call>", Stop, Piece{Calls: calls(ParsedCall{"f", `{"n":1}`})}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewParser(c.opts)
			for i, s := range c.steps {
				got := p.Add(s.text, s.end)
				if !reflect.DeepEqual(normal(got), normal(s.want)) {
					t.Fatalf("step %d Add(%q, %v) = %+v, want %+v", i, s.text, s.end, got, s.want)
				}
			}
		})
	}
}

func normal(p Piece) Piece {
	if len(p.Calls) == 0 {
		p.Calls = nil
	}
	return p
}

// whole runs text through a parser in the given pieces and joins what
// comes out.
func whole(o Options, pieces []string, end End) Piece {
	p := NewParser(o)
	var out Piece
	for i, text := range pieces {
		e := More
		if i == len(pieces)-1 {
			e = end
		}
		got := p.Add(text, e)
		out.Reasoning += got.Reasoning
		out.Text += got.Text
		out.Calls = append(out.Calls, got.Calls...)
	}
	return normal(out)
}

// TestParserCuts: every split of a reply into two pieces gives what the
// whole reply gives.
func TestParserCuts(t *testing.T) {
	reply := "<think>plan é</think>Let me check.\n<tool_call>f<arg_key>n</arg_key><arg_value>3</arg_value><arg_key>s</arg_key><arg_value>x y</arg_value></tool_call>\n<tool_call>f</tool_call> done"
	o := Options{Chat: true, Tools: streamTools}
	want := whole(o, []string{reply}, Stop)
	if want.Reasoning != "plan é" || want.Text != "Let me check.done" || len(want.Calls) != 2 || want.Calls[0].Arguments != `{"n":3,"s":"x y"}` {
		t.Fatalf("whole reply: %+v", want)
	}
	for cut := 0; cut <= len(reply); cut++ {
		if got := whole(o, []string{reply[:cut], reply[cut:]}, Stop); !reflect.DeepEqual(got, want) {
			t.Fatalf("cut at %d: %+v, want %+v", cut, got, want)
		}
	}
}

// FuzzParser: the pieces add up to the same reply however the text is
// cut, and no tag of the dialect reaches the reasoning.
func FuzzParser(f *testing.F) {
	f.Add("<think>a</think>hello <tool_call>f<arg_key>n</arg_key><arg_value>1</arg_value></tool_call> world", 7, true)
	f.Add("ab<tool_ca", 3, false)
	f.Fuzz(func(t *testing.T, text string, cut int, chat bool) {
		if cut < 0 || cut > len(text) {
			return
		}
		o := Options{Chat: chat, Tools: streamTools}
		for _, end := range []End{Stop, Cut} {
			a := whole(o, []string{text}, end)
			b := whole(o, []string{text[:cut], text[cut:]}, end)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("end %v: whole %+v, cut at %d %+v", end, a, cut, b)
			}
			if strings.Contains(a.Reasoning, thinkOpen) || strings.Contains(a.Reasoning, thinkClose) {
				t.Fatalf("reasoning %q holds a think tag", a.Reasoning)
			}
		}
	})
}
