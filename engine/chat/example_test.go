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
