package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/bench"
	"github.com/spoolhq/spool/engine/plan"
)

func newBenchPackCmd() *cobra.Command {
	var (
		modelDir string
		workers  int
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "pack --model DIR",
		Short: "Measure packing throughput: experts coded, written and verified from the disk per second",
		Long: `Pack packs every shard's routed experts as spool pull does after each shard's
download (coded on every core, the pack written and synced, every record
decoded back from the disk and checked), into a temporary directory: the
model is not changed. It reports the raw expert bytes packed per second of
wall time and per second of CPU time (which other processes on a shared
machine do not inflate), and the ratio. A download never waits for packing
while this rate is above the download's.`,
		Example: `  spool gen-bench --out /tmp/p2 --sparse-layers 4 --experts 64 --codes normal
  spool bench pack --model /tmp/p2 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := bench.Pack(cmd.Context(), modelDir, workers)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(r)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "model\t%s\n", r.Model)
			fmt.Fprintf(tw, "kernels\tencoder %s, decode loop %s, %d workers on %d threads\n", r.Encoder, r.DecodeLoop, r.Workers, r.Threads)
			fmt.Fprintf(tw, "packed\t%d experts of %d shards: %s -> %s (%.3f)\n", r.Experts, r.Shards, plan.SizeText(r.RawBytes), plan.SizeText(r.PackedBytes), r.Ratio)
			fmt.Fprintf(tw, "time\t%.2f s wall, %.2f s CPU\n", r.Seconds, r.CPUSeconds)
			fmt.Fprintf(tw, "throughput\t%.0f MB/s of experts (%.0f MB/s per CPU second)\n", r.BytesPerSecond/1e6, r.CPUBytesPerSecond/1e6)
			return tw.Flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "model directory")
	fl.IntVar(&workers, "workers", 0, "experts coded at once (default: one per core)")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.MarkFlagRequired("model")
	return cmd
}
