package server

import (
	"net/http"
	"testing"
)

// TestMinPReachesTheSampler: min_p 1 keeps only the most likely token, so a
// sampled reply at any temperature and seed is the greedy one.
func TestMinPReachesTheSampler(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	reply := func(extra map[string]any) string {
		t.Helper()
		status, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(extra))
		if status != http.StatusOK {
			t.Fatalf("%v: status %d %v", extra, status, body)
		}
		text, _ := jpath(body, "choices", 0, "message", "content").(string)
		return text
	}
	greedy := reply(map[string]any{"temperature": 0})
	if greedy == "" {
		t.Fatal("the greedy reply is empty")
	}
	// Without min_p the same seeds sample something else at least once.
	differs := false
	for _, seed := range []int{1, 2, 3} {
		differs = differs || reply(map[string]any{"temperature": 2, "seed": seed}) != greedy
	}
	if !differs {
		t.Fatal("temperature 2 sampled the greedy reply for every seed: the test cannot tell min_p's effect")
	}
	for _, seed := range []int{1, 2, 3} {
		if got := reply(map[string]any{"temperature": 2, "min_p": 1, "seed": seed}); got != greedy {
			t.Errorf("seed %d, min_p 1: %q, want the greedy %q", seed, got, greedy)
		}
	}
}
