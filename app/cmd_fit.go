package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/speed"
	"github.com/spoolhq/spool/internal/regularfile"
)

// exitNoFit is spool fit's exit status when the model does not fit.
const exitNoFit = 3

type fitFlags struct {
	model       string
	config      string
	groupSize   int
	indexer     bool
	noMTP       bool
	context     int
	sequences   int
	segment     int
	threads     int
	jsonOut     bool
	chip        string
	probes      string
	drafting    speed.Drafting
	memoryArgs  memoryFlags
	promptCache promptCacheFlags
}

func newFitCmd() *cobra.Command {
	var f fitFlags
	cmd := &cobra.Command{
		Use:   "fit (--model DIR | --config FILE)",
		Short: "Plan the process memory for a model and say whether it fits",
		Long: `Fit lays out the memory equation of running a model: resident weights,
expert slabs (working bank, MTP bank, LRU and pinned cache), the compressed
KV cache for the context, working buffers and reserves, and sizes the expert
cache from what the memory leaves. It exits with status 3 when not even one
cache slot per expert layer fits.

It also predicts the speed: decode and prefill tokens per second, from the
figures 'spool bench probe' measured on this machine (cached), or with
--chip from an Apple chip's published figures (SSD read, memory bandwidth,
GPU throughput), with the assumptions in words. With an MTP layer it
predicts decode with drafts too, from the drafts' acceptance and the
experts a verify forward's two positions read together (--mtp-acceptance,
--mtp-union; stated), and says which the engine's gate would choose.

With --model the figures come from the container's headers. With --config
they are derived from a bare config.json assuming the pinned public
artifact's formats (int4 with per-row scales, int8 embedding and lm_head,
int8 MTP layer, no DSA indexer); --group-size 64 assumes the newer
converter's group-64 int4 instead.`,
		Example: `  spool fit --config ../shared/fixtures/glm52-real/config.json --memory 32GiB
  spool fit --model ~/models/glm52 --context 8192 --json
  spool fit --config ../shared/fixtures/glm52-real/config.json --memory 48GiB --chip "M4 Pro"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFit(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model directory: plan from its container's headers")
	fl.StringVar(&f.config, "config", "", "a config.json (or a directory holding one): plan from the config alone")
	fl.IntVar(&f.groupSize, "group-size", 0, "with --config: int4 scale group size, 0 for per-row scales (the pinned artifact) or 64")
	fl.BoolVar(&f.indexer, "indexer", false, "with --config: include the DSA indexer weights (int8)")
	fl.BoolVar(&f.noMTP, "no-mtp", false, "with --config: plan without the MTP layer")
	fl.IntVar(&f.context, "context", plan.DefaultContext, "context length in tokens")
	fl.IntVar(&f.sequences, "sequences", 1, "sequences decoded together (KV slots)")
	fl.IntVar(&f.segment, "segment", 0, "prompt tokens one forward takes through the model, layer by layer (default: the longest segment the memory allows)")
	fl.IntVar(&f.threads, "threads", runtime.GOMAXPROCS(0), "worker threads planned for (default: this machine's)")
	fl.BoolVar(&f.jsonOut, "json", false, "print one JSON object")
	fl.StringVar(&f.chip, "chip", "", "predict speed for this Apple chip from its published figures (e.g. \"M4 Pro\") instead of this machine's probes")
	fl.StringVar(&f.probes, "probes", "", "probe file to predict speed from (default: the one 'spool bench probe' cached)")
	fl.Float64Var(&f.drafting.Acceptance, "mtp-acceptance", speed.DefaultAcceptance, "share of MTP drafts accepted, assumed for the prediction of decode with drafts")
	fl.Float64Var(&f.drafting.Union, "mtp-union", 0, "routed experts a verify forward's two positions read in a layer, in one position's (1..2; default 2 - k/E: routing spread evenly)")
	f.memoryArgs.register(fl)
	f.promptCache.register(fl)
	cmd.MarkFlagsMutuallyExclusive("model", "config")
	cmd.MarkFlagsOneRequired("model", "config")
	return cmd
}

func runFit(cmd *cobra.Command, f *fitFlags) error {
	if f.model != "" && (f.groupSize != 0 || f.indexer || f.noMTP) {
		return errors.New("--group-size, --indexer and --no-mtp describe an assumed artifact; use them with --config")
	}
	var (
		cfg *config.Config
		w   plan.Weights
		err error
	)
	if f.model != "" {
		cfg, w, err = host.WeightsOf(f.model)
	} else {
		cfg, w, err = weightsFromConfig(f.config, f.groupSize, f.indexer, f.noMTP)
	}
	if err != nil {
		return err
	}
	opts, err := f.memoryArgs.Options()
	if err != nil {
		return err
	}
	opts.Context, opts.Sequences, opts.Segment, opts.Threads = f.context, f.sequences, f.segment, f.threads
	if a, u := f.drafting.Acceptance, f.drafting.Union; !(a >= 0 && a <= 1) || u != 0 && !(u >= 1 && u <= 2) {
		return fmt.Errorf("--mtp-acceptance must be in 0..1 and --mtp-union in 1..2 (got %g, %g)", a, u)
	}
	if f.context <= 0 || f.sequences <= 0 || f.threads <= 0 || f.segment < 0 {
		return fmt.Errorf("--context, --sequences and --threads must be positive and --segment not negative (got %d, %d, %d, %d)", f.context, f.sequences, f.threads, f.segment)
	}
	pc, err := f.promptCache.resolve()
	if err != nil {
		return err
	}
	if opts.PromptCache, err = pc.PlanMemory(cfg, w); err != nil {
		return err
	}
	p, err := plan.New(cfg, w, opts)
	if err != nil {
		return err
	}
	sp, err := predictSpeed(cfg, w, p, f.chip, f.probes, &f.drafting)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(fitReport{Plan: p, Speed: sp}); err != nil {
			return err
		}
	} else {
		fmt.Fprint(out, p.Table())
		if p.Suggestion != "" {
			fmt.Fprintln(out, "suggestion:", p.Suggestion)
		}
		fmt.Fprint(out, sp.text())
	}
	if !p.Fits {
		return exitError{code: exitNoFit}
	}
	return nil
}

// fitReport is spool fit's JSON: the plan's fields and the speed section.
type fitReport struct {
	*plan.Plan
	Speed *fitSpeed `json:"speed"`
}

// fitSpeed is the predicted speed, or why there is none.
type fitSpeed struct {
	*speed.Prediction
	// Unavailable says why no speed is predicted (no probes yet, a model
	// without routed experts) and what to do.
	Unavailable string `json:"unavailable,omitempty"`
	// NoProbes is set when what is missing is this machine's probes (the
	// Fit page then offers an Apple chip's figures meanwhile).
	NoProbes bool `json:"no_probes,omitempty"`
}

func (s *fitSpeed) text() string {
	if s.Prediction == nil {
		return "speed: not predicted: " + s.Unavailable + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "speed: decode %.2f tok/s, prefill %.1f tok/s (%d-token prompt) on %s\n",
		s.DecodeTokensPerSecond, s.PrefillTokensPerSecond, s.PrefillTokens, s.Machine)
	if d := s.Drafting; d != nil {
		fmt.Fprintf(&b, "speed with MTP drafts: decode %.2f tok/s at %.0f%% accepted, %.2fx a token's experts a verify (%.0f MB read a token, %.0f MB without drafts); the engine would choose %s\n",
			d.DecodeTokensPerSecond, 100*d.Acceptance, d.Union, float64(d.DecodeReadBytesPerToken)/1e6, float64(s.DecodeReadBytesPerToken)/1e6, d.Choice)
	}
	if a := s.AgentPrompt; a != nil {
		fmt.Fprintf(&b, "agent prompt: %d tokens in %d segment(s), %s (expert reads %s, products on the %s %s)\n",
			a.Tokens, a.Segments, duration(a.Seconds), duration(a.ReadSeconds), a.Device, duration(a.ComputeSeconds))
	}
	for _, a := range s.Assumptions {
		fmt.Fprintln(&b, "  -", a)
	}
	return b.String()
}

// duration says seconds as seconds or minutes.
func duration(s float64) string {
	if s < 120 {
		return fmt.Sprintf("%.0f s", s)
	}
	return fmt.Sprintf("%.1f min", s/60)
}

// predictSpeed predicts the speed of plan p on chip (an Apple chip's
// published figures) or, without one, on this machine from the probe file
// (probes, or by default the cached one), drafted decode under drafting
// (nil: the defaults). Only an unknown chip is an error: without probes
// the section says how to get them.
func predictSpeed(cfg *config.Config, w plan.Weights, p *plan.Plan, chip, probes string, drafting *speed.Drafting) (*fitSpeed, error) {
	var mc speed.Machine
	if chip != "" {
		c, err := speed.LookupChip(chip)
		if err != nil {
			return nil, fmt.Errorf("--chip: %w", err)
		}
		mc = c.Machine()
	}
	if !p.Fits {
		return &fitSpeed{Unavailable: "the plan does not fit this memory, so there is no speed to predict"}, nil
	}
	if chip == "" {
		if probes == "" {
			probes = speedProbesPath()
		}
		if probes == "" {
			return &fitSpeed{Unavailable: speed.ErrNoProbes.Error(), NoProbes: true}, nil
		}
		pr, err := speed.Load(probes)
		if err != nil {
			return &fitSpeed{Unavailable: err.Error(), NoProbes: errors.Is(err, speed.ErrNoProbes)}, nil
		}
		mc = speed.FromProbes(pr)
	}
	m := speed.ModelFromPlan(cfg, w, p)
	m.Drafting = drafting
	pred, err := speed.Predict(m, mc)
	if err != nil {
		return &fitSpeed{Unavailable: err.Error()}, nil
	}
	return &fitSpeed{Prediction: &pred}, nil
}

// maxFitConfigBytes bounds a config.json given to fit (a real one is a few
// KB; a FIFO or a huge file is refused unread).
const maxFitConfigBytes = 16 << 20

// weightsFromConfig derives the weights from a bare config.json (or the
// one in a directory) with the assumed artifact formats.
func weightsFromConfig(path string, groupSize int, indexer, noMTP bool) (*config.Config, plan.Weights, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	raw, err := regularfile.Read(path, maxFitConfigBytes)
	if err != nil {
		return nil, plan.Weights{}, fmt.Errorf("config: %w", err)
	}
	cfg, err := config.Parse(raw, nil)
	if err != nil {
		return nil, plan.Weights{}, fmt.Errorf("config: %s: %w", path, err)
	}
	format, err := plan.FormatForGroupSize(groupSize)
	if err != nil {
		return nil, plan.Weights{}, err
	}
	w, err := plan.FromConfig(cfg, plan.Artifact{Int4: format, WithIndexer: indexer, WithoutMTP: noMTP})
	return cfg, w, err
}
