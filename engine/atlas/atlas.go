package atlas

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Defaults of AnalyzeOptions, as in Colibri's analyze.py.
const (
	DefaultMinCount = 30
	DefaultMinRuns  = 2
)

// Atlas is the experts.json analysis document. Categories, Experts and
// the Expert fields follow Colibri's schema; Provenance is Spool's
// addition and is ignored by Colibri's tools.
type Atlas struct {
	Categories []string    `json:"categories"`
	Experts    []Expert    `json:"experts"`
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Expert is one characterised routed expert.
type Expert struct {
	Layer  int   `json:"layer"`
	Expert int   `json:"expert"`
	Total  int64 `json:"total"` // selections over every run
	// Spec is 1 − H(p)/ln C: 0 for an even topic mix, 1 for one topic.
	Spec     float64 `json:"spec"`
	TopTopic string  `json:"top_topic"`
	// TopLift is p[TopTopic]·C: how many times more than chance.
	TopLift float64 `json:"top_lift"`
	// Reliability is "fired/runs" over the top topic's runs.
	Reliability string             `json:"reliability"`
	P           map[string]float64 `json:"p"`
}

// Provenance says where an atlas came from.
type Provenance struct {
	Model       string              `json:"model"`        // model directory name or id
	ModelConfig string              `json:"model_config"` // sha256 of its config.json
	Tool        string              `json:"tool"`         // e.g. "spool atlas"
	ToolVersion string              `json:"tool_version"`
	Date        string              `json:"date"` // RFC 3339 date of the probe
	Method      string              `json:"method"`
	Prompts     map[string][]string `json:"prompts"` // category -> prompt texts
	MinCount    int                 `json:"min_count"`
	MinRuns     int                 `json:"min_runs"`
	Runs        int                 `json:"runs"`
}

// Run is the routing counts of one prompt: Counts[i][e] is how often
// expert e of layer Layers[i] was chosen.
type Run struct {
	Category string
	Layers   []int
	Counts   [][]int64
}

// AnalyzeOptions are the filters of Analyze. Zero fields take the
// defaults; a negative value turns a filter off.
type AnalyzeOptions struct {
	// MinCount drops experts selected fewer times over all runs.
	MinCount int
	// MinRuns is the replication gate: an expert is kept only if it fired
	// in at least this many runs of its top category.
	MinRuns int
}

func (o AnalyzeOptions) withDefaults() AnalyzeOptions {
	if o.MinCount == 0 {
		o.MinCount = DefaultMinCount
	}
	if o.MinRuns == 0 {
		o.MinRuns = DefaultMinRuns
	}
	return o
}

// Analyze computes the atlas of runs. Every run must have the same layers
// and expert count. Categories are listed in the order they first appear.
func Analyze(runs []Run, opts AnalyzeOptions) (*Atlas, error) {
	opts = opts.withDefaults()
	if len(runs) == 0 {
		return nil, errors.New("atlas: no runs")
	}
	layers := runs[0].Layers
	if len(layers) == 0 || len(runs[0].Counts) != len(layers) || len(runs[0].Counts[0]) == 0 {
		return nil, errors.New("atlas: the first run has no expert counts")
	}
	experts := len(runs[0].Counts[0])
	var cats []string
	catOf := make([]int, len(runs))
	totals := make([]float64, len(runs))
	for i, r := range runs {
		if !slices.Equal(r.Layers, layers) || len(r.Counts) != len(layers) {
			return nil, fmt.Errorf("atlas: run %d (%s) covers layers %v, the first run %v", i, r.Category, r.Layers, layers)
		}
		for j, row := range r.Counts {
			if len(row) != experts {
				return nil, fmt.Errorf("atlas: run %d (%s) layer %d has %d experts, want %d", i, r.Category, layers[j], len(row), experts)
			}
			for _, n := range row {
				if n < 0 {
					return nil, fmt.Errorf("atlas: run %d (%s) layer %d has a negative count", i, r.Category, layers[j])
				}
				totals[i] += float64(n)
			}
		}
		if r.Category == "" {
			return nil, fmt.Errorf("atlas: run %d has no category", i)
		}
		c := slices.Index(cats, r.Category)
		if c < 0 {
			c = len(cats)
			cats = append(cats, r.Category)
		}
		catOf[i] = c
	}
	C := len(cats)
	runsOf := make([]int, C)
	for _, c := range catOf {
		runsOf[c]++
	}
	out := &Atlas{Categories: cats, Experts: []Expert{}}
	mean := make([]float64, C)
	fired := make([]int, C)
	for j, layer := range layers {
		for e := 0; e < experts; e++ {
			clear(mean)
			clear(fired)
			var total int64
			for i, r := range runs {
				n := r.Counts[j][e]
				total += n
				if n > 0 {
					fired[catOf[i]]++
				}
				if totals[i] > 0 {
					mean[catOf[i]] += float64(n) / totals[i]
				}
			}
			if total == 0 || (opts.MinCount > 0 && total < int64(opts.MinCount)) {
				continue
			}
			var sum float64
			for c := range mean {
				mean[c] /= float64(runsOf[c])
				sum += mean[c]
			}
			if sum == 0 {
				continue
			}
			ex := Expert{Layer: layer, Expert: e, Total: total, P: make(map[string]float64, C)}
			top, h := 0, 0.0
			for c, m := range mean {
				p := m / sum
				if p > mean[top]/sum {
					top = c
				}
				if p > 0 {
					h -= p * math.Log(p)
				}
				ex.P[cats[c]] = round4(p)
			}
			if opts.MinRuns > 0 && fired[top] < opts.MinRuns {
				continue
			}
			ex.Spec = 1
			if C > 1 {
				ex.Spec = round4(1 - h/math.Log(float64(C)))
			}
			ex.TopTopic = cats[top]
			ex.TopLift = round4(mean[top] / sum * float64(C))
			ex.Reliability = fmt.Sprintf("%d/%d", fired[top], runsOf[top])
			out.Experts = append(out.Experts, ex)
		}
	}
	slices.SortStableFunc(out.Experts, func(a, b Expert) int {
		return cmp.Or(cmp.Compare(b.Spec, a.Spec), cmp.Compare(b.Total, a.Total),
			cmp.Compare(a.Layer, b.Layer), cmp.Compare(a.Expert, b.Expert))
	})
	return out, nil
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// maxExperts bounds the experts a parsed document may list (GLM-5.2 has
// 76 × 256 = 19,456 routed experts).
const maxExperts = 1 << 20

// Parse reads an experts.json analysis document and checks it: known
// categories, p values in [0, 1], spec in [0, 1], non-negative ids.
func Parse(data []byte) (*Atlas, error) {
	var a Atlas
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("atlas: experts.json: %w", err)
	}
	if len(a.Categories) == 0 {
		return nil, errors.New("atlas: experts.json lists no categories")
	}
	if len(a.Experts) > maxExperts {
		return nil, fmt.Errorf("atlas: experts.json lists %d experts, more than %d", len(a.Experts), maxExperts)
	}
	for i, c := range a.Categories {
		if c == "" || slices.Index(a.Categories, c) != i {
			return nil, fmt.Errorf("atlas: experts.json category %d (%q) is empty or repeated", i, c)
		}
	}
	for i, e := range a.Experts {
		if e.Layer < 0 || e.Expert < 0 || e.Total < 0 {
			return nil, fmt.Errorf("atlas: experts.json expert %d has a negative layer, id or total", i)
		}
		if !(e.Spec >= 0 && e.Spec <= 1) {
			return nil, fmt.Errorf("atlas: experts.json expert %d:%d has spec %v outside [0, 1]", e.Layer, e.Expert, e.Spec)
		}
		if e.TopTopic != "" && !slices.Contains(a.Categories, e.TopTopic) {
			return nil, fmt.Errorf("atlas: experts.json expert %d:%d has top topic %q, not a category", e.Layer, e.Expert, e.TopTopic)
		}
		for c, p := range e.P {
			if !slices.Contains(a.Categories, c) {
				return nil, fmt.Errorf("atlas: experts.json expert %d:%d has p for %q, not a category", e.Layer, e.Expert, c)
			}
			if !(p >= 0 && p <= 1) {
				return nil, fmt.Errorf("atlas: experts.json expert %d:%d has p[%s] = %v outside [0, 1]", e.Layer, e.Expert, c, p)
			}
		}
	}
	return &a, nil
}
