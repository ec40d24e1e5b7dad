package chat_test

import (
	"fmt"
	"log"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/internal/fixtures"
)

// Render a conversation with the model's own chat template, as
// apply_chat_template does.
func ExampleTemplate_Render() {
	tmpl, err := chat.LoadTemplate(fixtures.DemoModel())
	if err != nil {
		log.Fatal(err)
	}
	prompt, err := tmpl.Render([]chat.Message{
		{Role: "system", Content: "Answer briefly."},
		{Role: "user", Content: "What is 2+2?"},
	}, chat.Options{AddGenerationPrompt: true, EnableThinking: new(false)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", prompt)
	// Output:
	// "[gMASK]<sop><|system|>\nAnswer briefly.<|user|>\nWhat is 2+2?<|assistant|>\n<think></think>\n"
}

// Split reasoning from the visible answer as the text streams in, cut at
// any point (here inside the closing tag).
func ExampleReasoningSplitter() {
	s := chat.SplitReasoning(true) // the prompt left the model thinking
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
	content, calls, err := chat.ParseToolCalls(reply, tools)
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
