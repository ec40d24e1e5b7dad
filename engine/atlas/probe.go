package atlas

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/spoolhq/spool/engine/model"
)

// Prompt is one probe prompt: its category, its text (for provenance) and
// its token ids (the text rendered and tokenized by the caller).
type Prompt struct {
	Category string
	Text     string
	Tokens   []int
}

// ProbeOptions shape a probe.
type ProbeOptions struct {
	// Generate is the number of greedy tokens decoded after each prompt;
	// their routing is counted too (the answer is where topic experts
	// work). 0 counts the prompt only.
	Generate int
	// StopTokens end a prompt's decoding early.
	StopTokens []int
}

// Probe runs m on every prompt (prefill, then Generate greedy tokens, one
// forward each) and counts the routed experts each forward chose, per
// prompt, over the model's sparse decoder layers.
func Probe(ctx context.Context, m *model.Model, prompts []Prompt, opts ProbeOptions) ([]Run, error) {
	if opts.Generate < 0 {
		return nil, fmt.Errorf("atlas: negative token count %d", opts.Generate)
	}
	cfg := m.Config()
	layers := cfg.SparseLayers()
	if len(layers) == 0 {
		return nil, errors.New("atlas: the model has no routed experts")
	}
	row := make(map[int]int, len(layers))
	for i, l := range layers {
		row[l] = i
	}
	runs := make([]Run, 0, len(prompts))
	for i, p := range prompts {
		if len(p.Tokens) == 0 {
			return nil, fmt.Errorf("atlas: prompt %d (%s) has no tokens", i, p.Category)
		}
		limit := len(p.Tokens) + opts.Generate + 1
		if limit > cfg.MaxPositionEmbeddings {
			return nil, fmt.Errorf("atlas: prompt %d (%s) needs %d positions, the model has %d", i, p.Category, limit, cfg.MaxPositionEmbeddings)
		}
		run := Run{Category: p.Category, Layers: layers, Counts: make([][]int64, len(layers))}
		for j := range run.Counts {
			run.Counts[j] = make([]int64, cfg.NumRoutedExperts)
		}
		seq := m.NewSequence(limit)
		tokens := p.Tokens
		for step := 0; step <= opts.Generate; step++ {
			tr := &model.Trace{}
			out, err := m.Forward(ctx, []model.Request{{Seq: seq, Tokens: tokens}}, tr)
			if err != nil {
				return nil, fmt.Errorf("atlas: prompt %d (%s): %w", i, p.Category, err)
			}
			for layer, rows := range tr.Routes {
				j, ok := row[layer]
				if !ok {
					continue
				}
				for _, ids := range rows {
					for _, e := range ids {
						run.Counts[j][e]++
					}
				}
			}
			logits := out[0].Logits[len(out[0].Logits)-1]
			next := argmax(logits)
			if slices.Contains(opts.StopTokens, next) {
				break
			}
			tokens = []int{next}
		}
		runs = append(runs, run)
	}
	return runs, nil
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
