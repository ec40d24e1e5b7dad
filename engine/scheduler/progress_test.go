package scheduler_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/spoolhq/spool/engine/scheduler"
)

// TestOnPrefill: a prompt read in chunks reports its progress at admission
// and after every chunk, before its first token; the next turn, which
// shares the prefix, reports the reused tokens as cached.
func TestOnPrefill(t *testing.T) {
	m := openMini(t)
	s := start(t, m, scheduler.Config{PrefillChunk: 8})
	prompt := prompts(t)[0]
	for len(prompt) < 40 {
		prompt = append(prompt, prompts(t)[0]...)
	}
	var mu sync.Mutex
	var got []scheduler.Progress
	firstTokenAt := -1
	req := scheduler.Request{Prompt: prompt, MaxTokens: 3, OnPrefill: func(p scheduler.Progress) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}}
	st, err := s.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for {
		toks, res, err := st.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) > 0 && firstTokenAt < 0 {
			mu.Lock()
			firstTokenAt = len(got)
			mu.Unlock()
		}
		if res != nil {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	chunks := (len(prompt) + 7) / 8
	if len(got) != chunks+1 {
		t.Fatalf("%d progress reports for %d chunks, want %d: %+v", len(got), chunks, chunks+1, got)
	}
	if got[0].Done != 0 || got[len(got)-1].Done != len(prompt) {
		t.Errorf("progress runs %d..%d, want 0..%d", got[0].Done, got[len(got)-1].Done, len(prompt))
	}
	if !slices.IsSortedFunc(got, func(a, b scheduler.Progress) int { return a.Done - b.Done }) {
		t.Errorf("progress goes backwards: %+v", got)
	}
	if firstTokenAt != len(got) {
		t.Errorf("the first token came after %d of %d reports", firstTokenAt, len(got))
	}

	// The same prompt again reuses the kept sequence.
	var again []scheduler.Progress
	req.OnPrefill = func(p scheduler.Progress) { again = append(again, p) }
	st, err = s.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	collect(t, st)
	if len(again) == 0 || again[0].CachedTokens == 0 || again[0].Done != again[0].CachedTokens {
		t.Errorf("the second turn reports %+v, want the reused prefix as cached and done", again)
	}
}
