// Command openaigo streams chat completions and a Responses answer from
// `spool serve` with openai-go v1.x, unmodified: the SDK that Genkit, mods
// and fabric are built on. Its decoder dispatches an event on every blank
// line, so a stream with a blank line that carries no data (an SSE comment
// with its blank line) ends with "unexpected end of JSON input" after 0
// chunks. It is its own module, so that the server's module does not
// depend on the SDK; openaigo.test.js runs it (go run .) against the
// conformance server (SPOOL_BASE_URL, SPOOL_API_KEY).
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
)

const (
	model    = "glm52-demo"
	question = "What does the function os.path.join do?"
)

func main() {
	base, key := os.Getenv("SPOOL_BASE_URL"), os.Getenv("SPOOL_API_KEY")
	if base == "" {
		fail("SPOOL_BASE_URL is not set: run it through openaigo.test.js")
	}
	client := openai.NewClient(option.WithBaseURL(strings.TrimSuffix(base, "/")+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, check := range []struct {
		name string
		run  func(context.Context, openai.Client) error
	}{
		{"chat completion stream", chatStream},
		{"responses stream", responsesStream},
	} {
		if err := check.run(ctx, client); err != nil {
			fail("%s: %v", check.name, err)
		}
		fmt.Printf("ok: %s\n", check.name)
	}
}

// chatStream streams a chat completion and checks it against the same
// request answered whole.
func chatStream(ctx context.Context, client openai.Client) error {
	params := openai.ChatCompletionNewParams{
		Model:         model,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		MaxTokens:     openai.Int(24),
		Temperature:   openai.Float(0),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	whole, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		return fmt.Errorf("non-streaming: %w", err)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		return fmt.Errorf("after %d chunks: %w", chunks, err)
	}
	if len(acc.Choices) != 1 {
		return fmt.Errorf("%d chunks gave %d choices", chunks, len(acc.Choices))
	}
	got, want := acc.Choices[0].Message.Content, whole.Choices[0].Message.Content
	if got == "" || got != want {
		return fmt.Errorf("streamed %q, whole %q", got, want)
	}
	if acc.Usage.CompletionTokens != whole.Usage.CompletionTokens {
		return fmt.Errorf("streamed usage %d completion tokens, whole %d", acc.Usage.CompletionTokens, whole.Usage.CompletionTokens)
	}
	return nil
}

// responsesStream streams a Responses answer and checks its deltas against
// its completed response and the same request answered whole.
func responsesStream(ctx context.Context, client openai.Client) error {
	params := responses.ResponseNewParams{
		Model:           model,
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(question)},
		MaxOutputTokens: openai.Int(24),
		Temperature:     openai.Float(0),
	}
	whole, err := client.Responses.New(ctx, params)
	if err != nil {
		return fmt.Errorf("non-streaming: %w", err)
	}
	stream := client.Responses.NewStreaming(ctx, params)
	var text strings.Builder
	var final *responses.Response
	events := 0
	for stream.Next() {
		ev := stream.Current()
		events++
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta.OfString)
		case "response.completed", "response.incomplete":
			r := ev.Response
			final = &r
		}
	}
	if err := stream.Err(); err != nil {
		return fmt.Errorf("after %d events: %w", events, err)
	}
	if final == nil {
		return fmt.Errorf("%d events and no response.completed", events)
	}
	if got := text.String(); got == "" || got != final.OutputText() || got != whole.OutputText() {
		return fmt.Errorf("deltas %q, completed %q, whole %q", got, final.OutputText(), whole.OutputText())
	}
	return nil
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "openaigo: "+format+"\n", args...)
	os.Exit(1)
}
