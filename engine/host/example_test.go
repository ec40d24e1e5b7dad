package host_test

import (
	"context"
	"fmt"
	"log"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/internal/fixtures"
)

// Open the demo model exactly as spool serve and the app do (memory plan,
// streamed expert tier, scheduler), run its scheduler and generate a few
// tokens greedily.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := host.Open(ctx, host.Config{
		ModelDir:    fixtures.DemoModel(),
		Memory:      host.Memory{Budget: "8GiB"},
		Context:     512,
		MaxBatch:    1,
		PromptCache: host.PromptCache{Off: true},
		GPU:         host.GPUOff,
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Scheduler.Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	prompt := e.Model.Tokenizer.Encode("The capital of France is")
	st, err := e.Scheduler.Submit(ctx, scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 4}})
	if err != nil {
		log.Fatal(err)
	}
	for {
		_, res, err := st.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if res != nil {
			fmt.Printf("context %d, %d tokens, GPU %s\n", e.Plan.Context, res.CompletionTokens, e.GPU.Status().Reason)
			return
		}
	}
	// Output:
	// context 512, 4 tokens, GPU --gpu off
}
