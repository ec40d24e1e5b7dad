package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/bench"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/speed"
)

// speedProbesPath is where `spool bench probe` caches this machine's
// figures for `spool fit` and the Fit page: Spool/speed-probes.json in the
// user's cache directory ("" when there is none).
func speedProbesPath() string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "Spool", "speed-probes.json")
}

func newBenchProbeCmd() *cobra.Command {
	var (
		dir        string
		out        string
		probeBytes string
		seconds    float64
		asJSON     bool
		mem        memoryFlags
	)
	cmd := &cobra.Command{
		Use:   "probe --model DIR",
		Short: "Measure what decode speed rests on and cache it for spool fit's prediction",
		Long: `Probe measures the figures spool fit predicts speed from, and caches them
(atomically) for fit and the Fit page: the disk's random whole-expert read
rate from the model directory with the read pool's own requests and depth
(direct I/O where the file system has it), with the queue kept full and in
a decoded token's bursts (one layer's experts at a time), and the CPU time
the reads take; the experts' int4 product at the model's shape and the
kernels, in weight bytes per second on this machine's threads. Each disk
figure is the median of five rounds, the two kinds alternating. Run it once on the volume the
model will live on; any model directory there will do (a small
'spool gen-bench' one too).`,
		Example: `  spool bench probe --model ~/models/glm52
  spool fit --model ~/models/glm52 --json   # now with a speed section`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seconds <= 0 {
				return fmt.Errorf("--seconds must be positive, got %g", seconds)
			}
			pb, err := plan.ParseSize(probeBytes)
			if err != nil {
				return fmt.Errorf("--probe: %w", err)
			}
			if out == "" {
				if out = speedProbesPath(); out == "" {
					return errors.New("no user cache directory for the probe file: pass --out")
				}
			}
			p, err := bench.SpeedProbe(cmd.Context(), dir, &mem.Memory, pb, seconds)
			if err != nil {
				return err
			}
			if err := speed.Save(out, p); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(p)
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "machine\t%s, %d threads (%.0f%% of them this process's while probed)\n", p.Machine, p.Threads, 100*p.CoreShare)
			fmt.Fprintf(tw, "disk, expert reads\t%.2f GB/s, %d requests at once (direct %v) from %s\n", p.DiskBytesPerSecond/1e9, p.DiskQueueDepth, p.DiskDirect, p.DiskPath)
			fmt.Fprintf(tw, "disk, a token's bursts\t%.2f GB/s, %d experts of a layer at a time\n", p.DiskBurstBytesPerSecond/1e9, p.DiskBurstExperts)
			fmt.Fprintf(tw, "CPU time of the reads\t%.3f s per GB\n", p.ReadCPUSecondsPerByte*1e9)
			fmt.Fprintf(tw, "int4 expert products\t%.2f GB/s of weights\n", p.KernelBytesPerSecond/1e9)
			fmt.Fprintf(tw, "int4 matmul, 8 tokens\t%.2f GB/s of weights\n", p.MatMul8BytesPerSecond/1e9)
			fmt.Fprintf(tw, "memory read\t%.2f GB/s\n", p.MemoryReadBytesPerSecond/1e9)
			fmt.Fprintf(tw, "saved to\t%s\n", out)
			return tw.Flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dir, "model", "", "a model directory on the volume to probe")
	fl.StringVar(&out, "out", "", "probe file to write (default: Spool/speed-probes.json in the user cache directory)")
	fl.StringVar(&probeBytes, "probe", "6GiB", "bytes the disk probes read (five rounds of each kind, a tenth each, the medians kept)")
	fl.Float64Var(&seconds, "seconds", 0.5, "seconds per kernel measurement (8 measurements, and 5 rounds of half as long of the expert products)")
	fl.BoolVar(&asJSON, "json", false, "print the probe file's JSON")
	mem.register(fl)
	cmd.MarkFlagRequired("model")
	return cmd
}
