package main

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/fixtures"
)

func runRunCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // usage history of --stream runs
	return execute(newRunCmd(), args...)
}

func idsFlag(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}

// TestRunMatchesReference: spool run --json on the reference prompts gives
// the reference greedy tokens, resident and streamed, with and without MTP
// speculation, on the fixture glm52-mini and on the demo model.
func TestRunMatchesReference(t *testing.T) {
	for _, name := range []string{"glm52-mini", fixtures.DemoName} {
		t.Run(name, func(t *testing.T) {
			refs, _ := fixtures.LoadRefs(t, name)
			dir := fixtures.ModelDir(t, name)
			for _, cs := range refs.Cases {
				t.Run(cs.Label, func(t *testing.T) { checkRunGreedy(t, dir, cs) })
			}
		})
	}
}

// checkRunGreedy runs the case's prompt resident, with --no-mtp, with
// --speculative (gated, and drafting every step) and streamed (which
// speculates, gated), and compares each with its greedy tokens.
func checkRunGreedy(t *testing.T, dir string, cs fixtures.Case) {
	t.Helper()
	for _, extra := range [][]string{nil, {"--no-mtp"}, {"--speculative"}, {"--speculative", "--mtp-gate=false"}, {"--stream", "--memory", "8GiB", "--expert-cache", "1MiB"}} {
		args := append([]string{"--model", dir, "--prompt-ids", idsFlag(cs.PromptIDs), "--max-tokens", "16", "--temperature", "0", "--json"}, extra...)
		out, err := runRunCmd(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, out)
		}
		var r runResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: output is not one JSON object: %v\n%s", extra, err, out)
		}
		if r.PromptTokens != cs.N || len(r.TokenIDs) > len(cs.Greedy) {
			t.Errorf("%v: %d prompt tokens, %d generated; want %d and at most %d", extra, r.PromptTokens, len(r.TokenIDs), cs.N, len(cs.Greedy))
			continue
		}
		// Equal to the reference up to its first near-tie (margin at most
		// 1e-3, as in engine/model's parity tests), where float32 and the
		// float64 reference may part.
		for i, id := range r.TokenIDs {
			if id != cs.Greedy[i] {
				if cs.GreedyMargins[i] > 1e-3 {
					t.Errorf("%v: tokens %v, want a prefix of %v", extra, r.TokenIDs, cs.Greedy)
				}
				break
			}
		}
		if r.FinishReason == "" || r.Text == "" {
			t.Errorf("%v: result %+v", extra, r)
		}
		// Speculating, the report says what each mode cost and which the
		// gate chose; without a gate, every decode step drafts but the
		// last (whose draft could not be emitted).
		speculating := len(extra) > 0 && extra[0] != "--no-mtp"
		switch d := r.Drafting; {
		case speculating != (d != nil):
			t.Errorf("%v: drafting report %+v", extra, d)
		case d != nil && d.Draft.Tokens+d.Plain.Tokens > len(r.TokenIDs):
			t.Errorf("%v: the report counts %d+%d tokens of %d", extra, d.Draft.Tokens, d.Plain.Tokens, len(r.TokenIDs))
		case d != nil && len(extra) == 2 && (d.Choice != "draft" || d.Plain.Steps > 1 || d.Draft.Drafts == 0):
			t.Errorf("%v: drafting report %+v, want a draft every step", extra, d)
		}
	}
}

func TestRunChatText(t *testing.T) {
	out, err := runRunCmd(t, "--model", fixtures.Path(t, "glm52-mini"), "--chat", "What does the function re.compile do?", "--temperature", "0", "--max-tokens", "24")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "Compile a given expression") {
		t.Errorf("answer %q", out)
	}
}

func TestRunRefusals(t *testing.T) {
	dir := fixtures.Path(t, "glm52-mini")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", dir}, "at least one of the flags"},
		{[]string{"--model", dir, "--prompt", "a", "--chat", "b"}, "none of the others"},
		{[]string{"--model", dir, "--prompt-ids", "1,x"}, `"x" is not a token id`},
		{[]string{"--model", dir, "--prompt-ids", "99999"}, "outside the vocabulary"},
		{[]string{"--model", dir, "--prompt", "hi", "--max-tokens", "0"}, "--max-tokens must be positive"},
		{[]string{"--model", dir, "--prompt", "hi", "--temperature", "500"}, "temperature"},
		{[]string{"--model", dir, "--prompt", "hi", "--temperature", "2.5"}, "temperature 2.5 is out of range (0..2)"},
		{[]string{"--model", dir, "--prompt", "hi", "--min-p", "1.5"}, "min_p 1.5 is out of range"},
		{[]string{"--model", dir, "--prompt", "hi", "--memory", "1GiB"}, "does not fit"},
		{[]string{"--model", t.TempDir(), "--prompt", "hi"}, "config.json"},
		{[]string{"--model", dir, "--prompt-ids", idsFlag(make([]int, 40)), "--context", "16"}, "does not fit the KV cache line"},
	} {
		out, err := runRunCmd(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q\n%s", tc.args, err, tc.want, out)
		}
	}
}

// TestRunPromptCache: a second spool run whose prompt begins with the
// first's restores that prefix from the prompt cache's disk tier (a new
// process each time) and prints the tokens a run without the cache prints,
// greedy and seeded, with and without MTP speculation.
func TestRunPromptCache(t *testing.T) {
	refs, _ := fixtures.LoadRefs(t, "glm52-mini")
	model := fixtures.Path(t, "glm52-mini")
	prompt := refs.Cases[len(refs.Cases)-1].PromptIDs
	turn := append(slices.Clone(prompt), 39, 40, 41)
	run := func(cache string, ids []int, extra ...string) runResult {
		t.Helper()
		args := append([]string{"--model", model, "--prompt-ids", idsFlag(ids), "--max-tokens", "10", "--prompt-cache", cache, "--json"}, extra...)
		out, err := runRunCmd(t, args...)
		var r runResult
		if err != nil || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return r
	}
	for _, extra := range [][]string{{"--temperature", "0"}, {"--temperature", "0.8", "--seed", "3", "--speculative"}} {
		dir := t.TempDir()
		want := run("off", turn, extra...)
		if first := run(dir, prompt, extra...); first.CachedTokens != 0 || first.CacheCreationTokens < len(prompt)/16*16 || first.PromptCache != dir {
			t.Errorf("%v: first run %+v", extra, first)
		}
		got := run(dir, turn, extra...)
		if got.CachedTokens < len(prompt)/16*16 || !slices.Equal(got.TokenIDs, want.TokenIDs) {
			t.Errorf("%v: %d cached tokens, tokens %v; without the cache %v", extra, got.CachedTokens, got.TokenIDs, want.TokenIDs)
		}
	}
	if out, err := runRunCmd(t, "--model", model, "--prompt", "hi", "--prompt-cache", "off", "--prompt-cache-max", "1GiB"); err == nil || !strings.Contains(err.Error(), "--prompt-cache-max needs a prompt cache") {
		t.Errorf("--prompt-cache-max with the cache off: %v\n%s", err, out)
	}
}
