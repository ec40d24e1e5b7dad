package turn_test

import (
	"context"
	"fmt"
	"log"
	"path/filepath"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/local"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/engine/turn"
	"github.com/spoolhq/spool/internal/fixtures"
)

// localEngine is the local engine on the demo model, its scheduler running
// until ctx ends.
func localEngine(ctx context.Context) *local.Engine {
	dir := fixtures.DemoModel()
	d, err := loader.Open(ctx, dir, loader.Options{})
	if err != nil {
		log.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		log.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(dir)
	if err != nil {
		log.Fatal(err)
	}
	sched := scheduler.New(d.Model, scheduler.Config{ContextLength: 512})
	go sched.Run(ctx)
	e, err := local.New(local.Config{ModelID: "glm52-demo", Scheduler: sched, Tokenizer: tok, Template: tmpl})
	if err != nil {
		log.Fatal(err)
	}
	return e
}

// Run a turn and read its pieces as they come: a turn is an engine's job,
// bounded by the context it was submitted under, read by one goroutine.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var engine turn.Engine = localEngine(ctx)

	st, err := engine.Submit(ctx, &turn.Request{
		Messages:  []chat.Message{{Role: "user", Content: "What does the function os.path.join do?"}},
		Thinking:  new(false),
		Sampling:  turn.Sampling{Temperature: new(0.0)},
		MaxTokens: new(12),
	})
	if err != nil {
		log.Fatal(err) // a refusal: an *apiwire.Error or a *turn.ContextError
	}
	var reply turn.Reply
	for {
		p, err := st.Next(ctx)
		if err != nil {
			log.Fatal(err) // the turn failed after it started
		}
		reply.Add(p) // keep what came (a durable turn stores it here)
		if p.End != nil {
			break
		}
	}
	fmt.Printf("%s: %q\n", reply.End.Finish, reply.Text)
	// Output:
	// length: "Join two or more pathname components, inserting"
}

// Continue a reply from its tokens so far (a reply cut short by a stop or
// a crash): the turn gives what follows.
func Example_continue() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	engine := localEngine(ctx)
	ask := func(cont []int, max int) *turn.Reply {
		st, err := engine.Submit(ctx, &turn.Request{
			Messages: []chat.Message{{Role: "user", Content: "What does the function os.path.join do?"}},
			Thinking: new(false), Sampling: turn.Sampling{Temperature: new(0.0)}, MaxTokens: new(max), Continue: cont,
		})
		if err != nil {
			log.Fatal(err)
		}
		rep, err := turn.Collect(ctx, st)
		if err != nil {
			log.Fatal(err)
		}
		return rep
	}
	first := ask(nil, 4)
	var so []int
	for _, tk := range first.Tokens {
		so = append(so, tk.ID)
	}
	rest := ask(so, 8)
	fmt.Printf("%q + %q\n", first.Text, rest.Text)
	// Output:
	// "Join two or" + " more pathname components, inserting"
}
