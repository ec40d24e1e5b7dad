package atlas

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/loader"
	sharedfixtures "github.com/spoolhq/spool/internal/fixtures"
)

// fixturesDir returns ../shared/fixtures relative to the module root, or
// skips the test when it is absent.
func fixturesDir(t testing.TB) string {
	t.Helper()
	return sharedfixtures.Root(t)
}

// run builds a one-layer run with the given counts.
func run(cat string, counts ...int64) Run {
	return Run{Category: cat, Layers: []int{3}, Counts: [][]int64{counts}}
}

func TestAnalyze(t *testing.T) {
	// Three experts, two categories with two runs each. Expert 0 fires
	// only on "a", expert 1 evenly, expert 2 once on "b" (below MinRuns).
	runs := []Run{
		run("a", 10, 10, 0),
		run("a", 10, 10, 0),
		run("b", 0, 10, 1),
		run("b", 0, 10, 0),
	}
	a, err := Analyze(runs, AnalyzeOptions{MinCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Categories, ","); got != "a,b" {
		t.Fatalf("categories %q, want a,b", got)
	}
	if len(a.Experts) != 2 {
		t.Fatalf("got %d experts, want 2 (expert 2 fails the replication gate): %+v", len(a.Experts), a.Experts)
	}
	specialist, generalist := a.Experts[0], a.Experts[1]
	tests := []struct {
		name      string
		got, want any
	}{
		{"specialist id", specialist.Expert, 0},
		{"specialist spec", specialist.Spec, 1.0},
		{"specialist top", specialist.TopTopic, "a"},
		{"specialist lift", specialist.TopLift, 2.0},
		{"specialist reliability", specialist.Reliability, "2/2"},
		{"specialist total", specialist.Total, int64(20)},
		{"specialist p[b]", specialist.P["b"], 0.0},
		{"generalist id", generalist.Expert, 1},
		{"generalist layer", generalist.Layer, 3},
		// Shares: a runs 10/20 each, b runs 10/11 and 10/10.
		{"generalist p[a]", generalist.P["a"], round4(0.5 / (0.5 + (10.0/11+1)/2))},
		{"generalist top", generalist.TopTopic, "b"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	pb := (10.0/11 + 1) / 2 / (0.5 + (10.0/11+1)/2)
	h := -(pb*math.Log(pb) + (1-pb)*math.Log(1-pb))
	if want := round4(1 - h/math.Log(2)); generalist.Spec != want {
		t.Errorf("generalist spec %v, want %v", generalist.Spec, want)
	}
}

func TestAnalyzeFilters(t *testing.T) {
	runs := []Run{run("a", 5, 40), run("a", 5, 40), run("b", 0, 40), run("b", 0, 40)}
	tests := []struct {
		name string
		opts AnalyzeOptions
		want int
	}{
		{"defaults drop the rare expert", AnalyzeOptions{}, 1},
		{"min count off", AnalyzeOptions{MinCount: -1}, 2},
		{"strict replication", AnalyzeOptions{MinCount: -1, MinRuns: 3}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Analyze(runs, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Experts) != tc.want {
				t.Errorf("got %d experts, want %d", len(a.Experts), tc.want)
			}
		})
	}
}

func TestAnalyzeErrors(t *testing.T) {
	tests := []struct {
		name string
		runs []Run
		want string
	}{
		{"no runs", nil, "no runs"},
		{"empty run", []Run{{Category: "a"}}, "no expert counts"},
		{"layer mismatch", []Run{run("a", 1), {Category: "b", Layers: []int{4}, Counts: [][]int64{{1}}}}, "covers layers"},
		{"width mismatch", []Run{run("a", 1, 2), run("b", 1)}, "has 1 experts, want 2"},
		{"negative", []Run{run("a", -1)}, "negative count"},
		{"no category", []Run{run("", 1)}, "no category"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Analyze(tc.runs, AnalyzeOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"ok", `{"categories":["a","b"],"experts":[{"layer":1,"expert":2,"total":40,"spec":0.5,"top_topic":"a","top_lift":1.5,"reliability":"2/2","p":{"a":0.75,"b":0.25}}]}`, ""},
		{"not json", `{`, "experts.json"},
		{"no categories", `{"categories":[],"experts":[]}`, "no categories"},
		{"repeated category", `{"categories":["a","a"]}`, "repeated"},
		{"bad spec", `{"categories":["a"],"experts":[{"layer":1,"expert":2,"spec":2}]}`, "spec"},
		{"unknown topic", `{"categories":["a"],"experts":[{"layer":1,"expert":2,"spec":0,"top_topic":"z"}]}`, "not a category"},
		{"bad p", `{"categories":["a"],"experts":[{"layer":1,"expert":2,"spec":0,"p":{"a":1.5}}]}`, "outside"},
		{"negative id", `{"categories":["a"],"experts":[{"layer":-1,"expert":2,"spec":0}]}`, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestShippedAtlas checks the committed demo atlas against the schema.
func TestShippedAtlas(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "assets", "atlas", "glm52-demo.experts.json"))
	if err != nil {
		t.Fatalf("the committed atlas is missing: %v", err)
	}
	a, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if a.Provenance == nil || a.Provenance.Model == "" || a.Provenance.Date == "" || len(a.Provenance.Prompts) == 0 {
		t.Errorf("shipped atlas lacks provenance: %+v", a.Provenance)
	}
	if len(a.Experts) == 0 {
		t.Error("shipped atlas characterises no expert")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"categories":["a"],"experts":[{"layer":1,"expert":2,"spec":0.5,"p":{"a":1}}]}`))
	f.Add([]byte(`{"categories":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Parse(data)
		if err != nil {
			return
		}
		if _, err := json.Marshal(a); err != nil {
			t.Fatalf("a parsed atlas does not encode: %v", err)
		}
	})
}

// TestProbeTiny probes the tiny fixture model and checks the counts: every
// forward routes experts_per_tok experts per token in every sparse layer.
func TestProbeTiny(t *testing.T) {
	dir := filepath.Join(fixturesDir(t), "glm52-tiny")
	d, err := loader.Open(context.Background(), dir, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	prompts := []Prompt{
		{Category: "x", Tokens: []int{1, 2, 3, 4}},
		{Category: "x", Tokens: []int{5, 6, 7}},
		{Category: "y", Tokens: []int{9, 10, 11, 12, 13}},
	}
	const gen = 3
	runs, err := Probe(context.Background(), d.Model, prompts, ProbeOptions{Generate: gen})
	if err != nil {
		t.Fatal(err)
	}
	cfg := d.Model.Config()
	for i, r := range runs {
		if len(r.Layers) != len(cfg.SparseLayers()) {
			t.Fatalf("run %d covers %d layers, want %d", i, len(r.Layers), len(cfg.SparseLayers()))
		}
		for j, row := range r.Counts {
			var n int64
			for _, c := range row {
				n += c
			}
			want := int64((len(prompts[i].Tokens) + gen) * cfg.ExpertsPerToken)
			if n != want {
				t.Errorf("run %d layer %d: %d selections, want %d", i, r.Layers[j], n, want)
			}
		}
	}
	a, err := Analyze(runs, AnalyzeOptions{MinCount: -1, MinRuns: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Experts) == 0 {
		t.Fatal("no expert characterised")
	}
	if _, err := Probe(context.Background(), d.Model, []Prompt{{Category: "x"}}, ProbeOptions{}); err == nil {
		t.Error("an empty prompt was accepted")
	}
}
