package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/fixtures"
)

// demoQuality is app/testdata/demo-quality.json: common standard-library
// names, the question asked about each, and the first paragraph of its
// docstring (scripts/demomodel/build_qa.py wrote them).
type demoQuality struct {
	Threshold float64 `json:"threshold"`
	MinShare  float64 `json:"min_share"`
	Cases     []struct {
		Name     string `json:"name"`
		Question string `json:"question"`
		Expected string `json:"expected"`
	} `json:"cases"`
}

var wordPattern = regexp.MustCompile(`[a-z0-9]+`)

// answerScore is how closely an answer opens with the expected paragraph,
// word by word: twice the longest common subsequence of words over both
// lengths, the answer cut to the paragraph's length (0..1). The demo model's
// trainer (scripts/demomodel/make_demo_refs.py) scores the same way.
func answerScore(expected, answer string) float64 {
	e := wordPattern.FindAllString(strings.ToLower(expected), -1)
	a := wordPattern.FindAllString(strings.ToLower(answer), -1)
	if len(a) > len(e) {
		a = a[:len(e)]
	}
	if len(e)+len(a) == 0 {
		return 1
	}
	prev := make([]int, len(a)+1)
	for _, x := range e {
		cur := make([]int, len(a)+1)
		for j, y := range a {
			switch {
			case x == y:
				cur[j+1] = prev[j] + 1
			case prev[j+1] >= cur[j]:
				cur[j+1] = prev[j+1]
			default:
				cur[j+1] = cur[j]
			}
		}
		prev = cur
	}
	return 2 * float64(prev[len(a)]) / float64(len(e)+len(a))
}

func TestAnswerScore(t *testing.T) {
	for _, tc := range []struct {
		expected, answer string
		want             float64
	}{
		{"Return the square root of x.", "Return the square root of x. More text.", 1},
		{"a b c d", "a x c d", 0.75},
		{"a b", "zz", 0},
		{"Join two paths.", "", 0},
		{"", "", 1},
	} {
		if got := answerScore(tc.expected, tc.answer); got != tc.want {
			t.Errorf("answerScore(%q, %q) = %v, want %v", tc.expected, tc.answer, got, tc.want)
		}
	}
}

// TestDemoModelAnswers: asked "What does the function X do?" greedily with
// spool run --chat, the demo model gives the meaning of X's docstring for at
// least min_share of the common standard-library names in the list.
func TestDemoModelAnswers(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "demo-quality.json"))
	if err != nil {
		t.Fatal(err)
	}
	var q demoQuality
	if err := json.Unmarshal(raw, &q); err != nil {
		t.Fatal(err)
	}
	if len(q.Cases) < 50 {
		t.Fatalf("%d cases; the list needs at least 50", len(q.Cases))
	}
	passed := 0
	for _, c := range q.Cases {
		out, err := runRunCmd(t, "--model", fixtures.DemoModel(), "--chat", c.Question, "--temperature", "0", "--max-tokens", "120", "--json")
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.Name, err, out)
		}
		var r runResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%s: output is not one JSON object: %v\n%s", c.Name, err, out)
		}
		s := answerScore(c.Expected, r.Text)
		if s >= q.Threshold {
			passed++
		} else {
			t.Logf("%s: score %.2f\n  answer:   %q\n  expected: %q", c.Name, s, strings.TrimSpace(r.Text), c.Expected)
		}
	}
	share := float64(passed) / float64(len(q.Cases))
	t.Logf("demo model: %d of %d answers give the docstring's meaning (%.0f%%)", passed, len(q.Cases), 100*share)
	if share < q.MinShare {
		t.Errorf("%d of %d answers (%.0f%%) give the docstring's meaning; want at least %.0f%%", passed, len(q.Cases), 100*share, 100*q.MinShare)
	}
}
