package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/server"
	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/internal/fixtures"
)

// Serve a model with the OpenAI-compatible API and answer one chat
// completion. spool serve does the same with a memory plan, streamed
// experts and srv.Listen/srv.Serve instead of httptest.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := fixtures.DemoModel()
	d, err := loader.Open(ctx, dir, loader.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		log.Fatal(err)
	}
	tmpl, err := chat.LoadTemplate(dir)
	if err != nil {
		log.Fatal(err)
	}
	sched := scheduler.New(d.Model, scheduler.Config{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	srv, err := server.New(server.Config{ModelID: "glm52-demo", Logger: slog.New(slog.DiscardHandler)},
		server.Engine{Scheduler: sched, Tokenizer: tok, Template: tmpl})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	body := `{"model": "glm52-demo", "temperature": 0, "max_tokens": 32,
		"messages": [{"role": "user", "content": "What does the function math.sqrt do?"}]}`
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		log.Fatal(err)
	}
	c := out.Choices[0]
	fmt.Println(resp.StatusCode, c.FinishReason, out.Usage.PromptTokens, out.Usage.CompletionTokens)
	fmt.Printf("reasoning %q\ncontent %q\n", c.Message.ReasoningContent, c.Message.Content)
	// Output:
	// 200 stop 17 7
	// reasoning ""
	// content "Return the square root of x."
}
