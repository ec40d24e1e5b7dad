package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/synthetic"
)

func newGenBenchCmd() *cobra.Command {
	var (
		out  string
		opts synthetic.Options
	)
	cmd := &cobra.Command{
		Use:   "gen-bench --out DIR",
		Short: "Write a synthetic GLM-5.2-geometry model to measure on",
		Long: `Gen-bench writes a deterministic synthetic model whose routed experts have
GLM-5.2's real geometry (hidden 6144, expert width 2048; 18,915,328 bytes per
expert with per-row int4 scales, 21,233,664 with --group-size 64) around a
small everything-else: one dense layer, --sparse-layers sparse layers of
--experts experts, a 2048-token vocabulary. A 256-expert layer is 4.8 GB.
Its quantized codes are symmetric about zero, as a trained model's are, so
its routers spread a prompt over the experts as a trained model's do (a
512-token prompt routes to nearly every expert of each layer): expert I/O
measured on it means something. A synthetic byte-level tokenizer (byte
tokens, merges of lowercase letters, GLM-5.2's end tokens) comes with it,
so run, serve and the app take the directory like any model's.

--mtp ACCEPTANCE adds an MTP layer stored as GLM-5.2's (int8 per row, routed
experts of 37,789,696 bytes), whose drafts are accepted about that
fraction of the time: the main model then continues any prompt along a
seeded cycle through the vocabulary, a new token every step, and the MTP
layer drafts that cycle's next token, unless its token routes to one of
the MTP layer's loud experts (a seeded set, sized for the acceptance),
whose output drowns the draft. Drafts cost what GLM-5.2's do; only whether
they are accepted is chosen, so both sides of speculation can be measured.

--sparse-files writes instead the full 78-layer skeleton of the real artifact
(MTP layer included) with true headers. The tensors a prompt's routing
depends on (the embedding, the norms, the routers and their correction
biases: about 1.4 GB) get seeded values, so that a prompt spreads over the
experts as a trained model's does (a 64-token prompt reaches about 215 of
each layer's 256 experts); every other payload (the experts, the big
matrices) is a hole: the files have their real sizes (about 384 GB) but use
little disk, and the holes read as zeros. It measures the real geometry:
speed with realistic expert traffic, and bookkeeping at scale.`,
		Example: `  spool gen-bench --out /tmp/bench --sparse-layers 4 --experts 256
  spool gen-bench --out /tmp/rare --sparse-layers 8 --experts 64 --mtp 0
  spool gen-bench --out /tmp/skeleton --sparse-files`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.SparseFiles && (cmd.Flags().Changed("sparse-layers") || cmd.Flags().Changed("experts")) {
				return fmt.Errorf("--sparse-files writes GLM-5.2's 75 sparse layers of 256 experts; drop --sparse-layers and --experts")
			}
			if opts.SparseFiles {
				opts.SparseLayers, opts.Experts = 0, 0
			}
			opts.MTP = cmd.Flags().Changed("mtp")
			w := cmd.OutOrStdout()
			opts.OnShard = func(name string, n int64) {
				fmt.Fprintf(w, "wrote %s (%s)\n", name, plan.SizeText(n))
			}
			start := time.Now()
			res, err := synthetic.Generate(cmd.Context(), out, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s: %d files, %s, %d tensors; %d expert layers x %d experts of %d bytes; %.1fs\n",
				res.Dir, len(res.Files), plan.SizeText(res.Bytes), res.Tensors, res.ExpertLayers, res.ExpertsPerLayer, res.ExpertBytes, time.Since(start).Seconds())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "directory to write (must be absent or empty)")
	fl.IntVar(&opts.SparseLayers, "sparse-layers", 2, "sparse (routed-expert) layers after the one dense layer")
	fl.IntVar(&opts.Experts, "experts", 256, "routed experts per sparse layer (at least 8)")
	fl.IntVar(&opts.GroupSize, "group-size", 0, "int4 scale group size: 0 for per-row scales (the pinned artifact) or 64")
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the generated values")
	fl.Var(codesFlag{&opts.Codes}, "codes", "routed experts' int4 codes: uniform (incompressible) or normal (quantized normal weights, as compressible as GLM-5.2's)")
	fl.BoolVar(&opts.SparseFiles, "sparse-files", false, "write the full 78-layer header-true skeleton with hole payloads")
	fl.Float64Var(&opts.MTPAcceptance, "mtp", 0, "add an MTP layer (GLM-5.2's int8 storage) whose drafts are accepted about this fraction of the time: 0 rarely, 1 always")
	cmd.MarkFlagRequired("out")
	return cmd
}

// codesFlag is --codes: synthetic.Codes by name.
type codesFlag struct{ c *synthetic.Codes }

func (f codesFlag) String() string {
	if f.c != nil && *f.c == synthetic.CodesNormal {
		return "normal"
	}
	return "uniform"
}

func (f codesFlag) Set(s string) error {
	switch s {
	case "uniform":
		*f.c = synthetic.CodesUniform
	case "normal":
		*f.c = synthetic.CodesNormal
	default:
		return fmt.Errorf("%q is not uniform or normal", s)
	}
	return nil
}

func (codesFlag) Type() string { return "codes" }
