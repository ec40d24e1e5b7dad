package scheduler_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/scheduler"
)

// sequenceConstraint allows exactly the tokens of want, in order.
type sequenceConstraint struct {
	want []int
	at   int
}

func (c *sequenceConstraint) Mask(allowed []uint64) {
	if c.at < len(c.want) {
		t := c.want[c.at]
		allowed[t/64] |= 1 << (t % 64)
	}
}

func (c *sequenceConstraint) Accept(tok int) error {
	if c.at >= len(c.want) || c.want[c.at] != tok {
		return fmt.Errorf("token %d not allowed at %d", tok, c.at)
	}
	c.at++
	return nil
}

func (c *sequenceConstraint) Done() bool { return c.at == len(c.want) }

func TestLogitProcessing(t *testing.T) {
	m := openMini(t)
	s := start(t, m, scheduler.Config{})
	prompt := prompts(t)[0]
	eos := m.Config().EOSTokenIDs
	run := func(r scheduler.Request) ([]scheduler.Token, *scheduler.Result) {
		t.Helper()
		st, err := s.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, st)
	}
	greedy, _ := run(scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 16}})

	// A large bias forces a token.
	forced, _ := run(scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 3, LogitBias: map[int]float64{1234: 100}}})
	if !slices.Equal(ids(forced), []int{1234, 1234, 1234}) {
		t.Errorf("logit_bias +100: %v", ids(forced))
	}
	// A large negative bias bans the greedy first token.
	banned, _ := run(scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 1, LogitBias: map[int]float64{greedy[0].ID: -100}}})
	if banned[0].ID == greedy[0].ID {
		t.Errorf("logit_bias -100 did not ban token %d", greedy[0].ID)
	}
	// A frequency penalty keeps a token from repeating as much.
	repeats := func(toks []scheduler.Token) int {
		seen := map[int]int{}
		n := 0
		for _, tk := range toks {
			if seen[tk.ID] > 0 {
				n++
			}
			seen[tk.ID]++
		}
		return n
	}
	pen, _ := run(scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 16, FrequencyPenalty: 2, PresencePenalty: 2}})
	if repeats(pen) >= repeats(greedy) && repeats(greedy) > 0 {
		t.Errorf("penalties did not reduce repeats: %d with, %d without", repeats(pen), repeats(greedy))
	}

	// Logprobs: greedy picks the top alternative; probabilities are sane.
	lp, _ := run(scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 8, Logprobs: true, TopLogprobs: 5}})
	if !slices.Equal(ids(lp), ids(greedy[:8])) {
		t.Errorf("logprobs changed greedy tokens: %v vs %v", ids(lp), ids(greedy[:8]))
	}
	for i, tk := range lp {
		if len(tk.Top) != 5 || tk.Top[0].ID != tk.ID || math.Abs(tk.Top[0].Logprob-tk.Logprob) > 1e-9 || tk.Logprob > 0 {
			t.Fatalf("token %d: %+v", i, tk)
		}
		var p float64
		for j, alt := range tk.Top {
			p += math.Exp(alt.Logprob)
			if j > 0 && alt.Logprob > tk.Top[j-1].Logprob {
				t.Errorf("token %d: alternatives out of order: %+v", i, tk.Top)
			}
		}
		if p > 1+1e-6 {
			t.Errorf("token %d: top probabilities sum to %g", i, p)
		}
	}

	// A constraint decides every token and ends with a stop once done,
	// whatever the sampler would prefer.
	want := []int{300, 301, 302, 303}
	for _, smp := range []generate.Sampling{{}, {Temperature: 1.5, Seed: 3}} {
		for _, spec := range []bool{false, true} {
			toks, res := run(scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 10, Sampling: smp, StopTokens: eos, Speculative: spec, Constraint: &sequenceConstraint{want: want}}})
			if !slices.Equal(ids(toks), want) || res.FinishReason != scheduler.FinishStop {
				t.Errorf("constraint (%+v, spec %v): %v %s", smp, spec, ids(toks), res.FinishReason)
			}
		}
	}
	// Without stop tokens a finished constraint still stops.
	toks, res := run(scheduler.Request{Prompt: prompt, Params: generate.Params{MaxTokens: 10, Constraint: &sequenceConstraint{want: want[:2]}}})
	if !slices.Equal(ids(toks), want[:2]) || res.FinishReason != scheduler.FinishStop {
		t.Errorf("constraint without stop tokens: %v %s", ids(toks), res.FinishReason)
	}
}
