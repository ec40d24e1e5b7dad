package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/bench"
	"github.com/spoolhq/spool/engine/plan"
)

func newBenchReserveCmd() *cobra.Command {
	var (
		modelDir string
		mem      memoryFlags
		f        bench.ReserveOptions
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "reserve",
		Short: "Measure the process's memory beyond the memory plan's lines: what the runtime reserve holds",
		Long: `Reserve builds the engine spool serve runs (memory plan, streamed expert
tier, scheduler, the Go memory limit; no prompt cache), with the expert
cache at one slot per layer and the context at --tokens + --decode, so that
one request of --tokens seeded random ids generating --decode tokens fills
every line. It reports the process's peak RSS and footprint, the plan's
lines, and the peak less every line but the runtime reserve: the Go
runtime and collector's headroom, stacks, the tokenizer and chat template,
the binary and its libraries, the GPU driver's own memory; what the
runtime reserve line must hold.`,
		Example: `  spool bench reserve --model assets/models/glm52-demo --tokens 2048 --decode 16 --json
  spool bench reserve --model /tmp/bench4 --memory 8GiB --tokens 4096 --decode 16 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.Memory = mem.Memory
			res, err := bench.Reserve(cmd.Context(), modelDir, f)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(res)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "model\t%s, %d prompt tokens, %d decoded (%d generated)\n", res.Model, res.PromptTokens, res.DecodeTokens, res.Tokens)
			fmt.Fprintf(tw, "plan\t%s in lines, runtime reserve %s\n", plan.SizeText(res.PlannedLinesBytes), plan.SizeText(res.RuntimeReserveBytes))
			fmt.Fprintf(tw, "peak\tRSS %s, footprint %s\n", plan.SizeText(res.PeakRSSBytes), plan.SizeText(res.PeakFootprintBytes))
			fmt.Fprintf(tw, "beyond the lines\t%s (%.0f%% of the reserve), footprint %s\n", plan.SizeText(res.BeyondLinesBytes), 100*res.ReserveUse, plan.SizeText(res.BeyondFootprintBytes))
			fmt.Fprintf(tw, "Go runtime\t%s mapped: heap objects %s, stacks %s, metadata %s; limit %s\n", plan.SizeText(res.GoTotalBytes), plan.SizeText(res.GoHeapObjectsBytes), plan.SizeText(res.GoStackBytes), plan.SizeText(res.GoMetadataBytes), plan.SizeText(res.GoMemoryLimitBytes))
			return tw.Flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "model directory (default $SPOOL_MODEL or the demo model)")
	mem.register(fl)
	fl.IntVar(&f.Tokens, "tokens", 2048, "prompt tokens")
	fl.IntVar(&f.Decode, "decode", 16, "tokens generated after the prompt")
	fl.StringVar(&f.GPU, "gpu", "auto", "prefill on the GPU: auto, on or off")
	fl.Uint64Var(&f.Seed, "seed", 1, "seed of the prompt ids")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
