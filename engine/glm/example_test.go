package glm_test

import (
	"fmt"
	"log"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/glm"
)

// Read a reply as it streams in: reasoning, visible text and a tool call,
// the text cut anywhere (here inside the tags).
func ExampleParser() {
	tools := []chat.Tool{{"type": "function", "function": map[string]any{
		"name":       "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	}}}
	p := glm.NewParser(glm.Options{Chat: true, InThink: true, Tools: tools})
	steps := []string{"The user wants", " the weather.</th", "ink>Let me look.<tool_", "call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"}
	for i, text := range steps {
		end := glm.More
		if i == len(steps)-1 {
			end = glm.Stop
		}
		piece := p.Add(text, end)
		fmt.Printf("reasoning %q text %q calls %v\n", piece.Reasoning, piece.Text, piece.Calls)
	}
	// Output:
	// reasoning "The user wants" text "" calls []
	// reasoning " the weather." text "" calls []
	// reasoning "" text "Let me look." calls []
	// reasoning "" text "" calls [{get_weather {"city":"Paris"}}]
}

// Split reasoning from the visible answer as the text streams in, cut at
// any point (here inside the closing tag).
func ExampleReasoningSplitter() {
	s := glm.SplitReasoning(true) // the prompt left the model thinking
	for _, piece := range []string{"Two plus two", " is four.</th", "ink>The answer", " is 4."} {
		reasoning, content := s.Write(piece)
		fmt.Printf("reasoning %q content %q\n", reasoning, content)
	}
	reasoning, content := s.Flush()
	fmt.Printf("reasoning %q content %q\n", reasoning, content)
	// Output:
	// reasoning "Two plus two" content ""
	// reasoning " is four." content ""
	// reasoning "" content "The answer"
	// reasoning "" content " is 4."
	// reasoning "" content ""
}

// Parse GLM tool-call markup in a reply into OpenAI tool calls.
func ExampleParseToolCalls() {
	tools := []chat.Tool{{"type": "function", "function": map[string]any{
		"name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"},
		}},
	}}}
	reply := "Let me look.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>"
	content, calls, err := glm.ParseToolCalls(reply, tools)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", content)
	for _, c := range calls {
		fmt.Println(c.Name, c.Arguments)
	}
	// Output:
	// "Let me look."
	// get_weather {"city":"Paris","days":3}
}
