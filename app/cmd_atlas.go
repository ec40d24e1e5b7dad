package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/atlas"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/regularfile"
)

type atlasFlags struct {
	model    string
	out      string
	generate int
	minCount int
	minRuns  int
	date     string
}

func newAtlasCmd() *cobra.Command {
	var f atlasFlags
	cmd := &cobra.Command{
		Use:   "atlas",
		Short: "Probe a model's routed experts by topic and write experts.json",
		Long: `Atlas asks the model a few questions per topic (the demo model's
Python standard library topics), counts the routed experts each forward
chooses, and writes Colibri's Expert Atlas analysis (experts.json): per
expert its topic mix p, specialization spec = 1 - H(p)/ln C, top topic,
lift and reliability, plus the probe's provenance. The UI's Atlas page
draws it.`,
		Example: `  spool atlas --model assets/models/glm52-demo --out assets/atlas/glm52-demo.experts.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAtlas(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model directory (default $SPOOL_MODEL or the demo model)")
	fl.StringVar(&f.out, "out", "experts.json", "where to write the analysis (- for stdout)")
	fl.IntVar(&f.generate, "generate", 24, "greedy tokens decoded after each question (their routing counts too)")
	fl.IntVar(&f.minCount, "min-count", atlas.DefaultMinCount, "drop experts selected fewer times over all prompts (-1: keep all)")
	fl.IntVar(&f.minRuns, "min-runs", atlas.DefaultMinRuns, "keep an expert only if it fired on this many prompts of its top topic (-1: keep all)")
	fl.StringVar(&f.date, "date", "", "the probe date recorded in the provenance (default today, UTC)")
	return cmd
}

func runAtlas(cmd *cobra.Command, f *atlasFlags) error {
	ctx := cmd.Context()
	dir, err := host.ResolveModelDir(f.model)
	if err != nil {
		return err
	}
	lm, err := host.LoadModel(ctx, dir, loader.Options{Model: model.Options{DisableMTP: true}})
	if err != nil {
		return err
	}
	defer lm.Close()
	if lm.Template == nil {
		return fmt.Errorf("%s has no chat template; the atlas probe asks chat questions", dir)
	}
	cats := atlas.DemoCategories()
	var prompts []atlas.Prompt
	asked := map[string][]string{}
	noThink := false
	for _, c := range cats {
		for _, q := range c.Questions {
			text, err := lm.Template.Render([]chat.Message{{Role: "user", Content: q}}, chat.Options{AddGenerationPrompt: true, EnableThinking: &noThink})
			if err != nil {
				return err
			}
			prompts = append(prompts, atlas.Prompt{Category: c.Name, Text: q, Tokens: lm.Tokenizer.Encode(text)})
			asked[c.Name] = append(asked[c.Name], q)
		}
	}
	m := lm.Dir.Model
	runs, err := atlas.Probe(ctx, m, prompts, atlas.ProbeOptions{Generate: f.generate, StopTokens: m.Config().EOSTokenIDs})
	if err != nil {
		return err
	}
	a, err := atlas.Analyze(runs, atlas.AnalyzeOptions{MinCount: f.minCount, MinRuns: f.minRuns})
	if err != nil {
		return err
	}
	cfgSum, err := fileSHA256(filepath.Join(dir, "config.json"))
	if err != nil {
		return err
	}
	date := f.date
	if date == "" {
		date = time.Now().UTC().Format(time.DateOnly)
	}
	a.Provenance = &atlas.Provenance{
		Model:       filepath.Base(filepath.Clean(dir)),
		ModelConfig: cfgSum,
		Tool:        "spool atlas",
		ToolVersion: version,
		Date:        date,
		Method: fmt.Sprintf("each question rendered with the model's chat template (thinking off), prefilled, then up to %d greedy tokens; "+
			"routed-expert selections counted per question over the sparse decoder layers; Colibri analyze.py statistics", f.generate),
		Prompts:  asked,
		MinCount: f.minCount,
		MinRuns:  f.minRuns,
		Runs:     len(runs),
	}
	data, err := json.MarshalIndent(a, "", " ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if f.out == "-" {
		_, err = cmd.OutOrStdout().Write(data)
		return err
	}
	if err := os.WriteFile(f.out, data, 0o644); err != nil {
		return fmt.Errorf("atlas: %w", err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d experts characterised over %d categories from %d prompts\n", f.out, len(a.Experts), len(a.Categories), len(runs))
	return nil
}

func fileSHA256(path string) (string, error) {
	data, err := regularfile.Read(path, maxFitConfigBytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
