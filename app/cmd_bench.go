package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/bench"
)

// newBenchCmd is the `spool bench` parent; each benchmark is a subcommand.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure this machine: compute kernels, memory and storage bandwidth",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newBenchKernelsCmd())
	cmd.AddCommand(newBenchStreamCmd())
	cmd.AddCommand(newBenchPromptCacheCmd())
	cmd.AddCommand(newBenchPrefillCmd())
	cmd.AddCommand(newBenchProbeCmd())
	cmd.AddCommand(newBenchReserveCmd())
	return cmd
}

func newBenchKernelsCmd() *cobra.Command {
	var (
		asJSON  bool
		seconds float64
		threads int
		mib     int64
	)
	cmd := &cobra.Command{
		Use:   "kernels",
		Short: "Measure int4/int8 matrix-vector throughput against memory read bandwidth",
		Long: `Measures the quantized matrix-vector kernels on 6144x16384 matrices (GLM-5.2's
attention output shape) cycling through a working set far larger than the
caches, and the memory read and copy bandwidth over a buffer of the same size
with the same threads. The ratio is int4-g64 matvec bytes/s over memory read
bytes/s: how close weight streaming gets to the memory limit. The cpu-time
ratio divides the same bytes by process CPU time instead of wall time, which
other processes on a shared machine do not inflate.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seconds <= 0 {
				return fmt.Errorf("--seconds must be positive, got %g", seconds)
			}
			if mib < 64 {
				return fmt.Errorf("--mib must be at least 64, got %d", mib)
			}
			res, err := bench.Kernels(cmd.Context(), bench.KernelOptions{
				Seconds:    seconds,
				WorkingSet: mib << 20,
				Threads:    threads,
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				return enc.Encode(res)
			}
			gb := func(v float64) string { return fmt.Sprintf("%.2f GB/s", v/1e9) }
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "cpu\t%s, %s, %d threads\n", res.GOARCH, res.CPUFeatures, res.Threads)
			fmt.Fprintf(tw, "working set\t%d MiB, matrices %dx%d\n", res.WorkingSetBytes>>20, res.Rows, res.Cols)
			fmt.Fprintf(tw, "memory read\t%s\n", gb(res.MemoryReadBytesPerS))
			fmt.Fprintf(tw, "memory copy\t%s\t(bytes copied)\n", gb(res.MemoryCopyBytesPerS))
			fmt.Fprintf(tw, "int4-g64 matvec\t%s\n", gb(res.Int4G64MatVecBytesPerS))
			fmt.Fprintf(tw, "int4-row matvec\t%s\n", gb(res.Int4RowMatVecBytesPerS))
			fmt.Fprintf(tw, "int8-row matvec\t%s\n", gb(res.Int8RowMatVecBytesPerS))
			fmt.Fprintf(tw, "int4-g64 matmul n=8\t%s\t(weight bytes; 8 inputs per pass)\n", gb(res.Int4G64MatMul8BytesPerS))
			fmt.Fprintf(tw, "ratio\t%.2f\t(int4-g64 matvec / memory read)\n", res.Ratio)
			if res.CPURatio > 0 {
				fmt.Fprintf(tw, "cpu-time ratio\t%.2f\t(%s / %s per CPU-second per thread)\n",
					res.CPURatio, gb(res.Int4G64MatVecCPUBytesPerS), gb(res.MemoryReadCPUBytesPerS))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().Float64Var(&seconds, "seconds", 1, "seconds per measurement (8 measurements)")
	cmd.Flags().IntVar(&threads, "threads", 0, "threads (0: GOMAXPROCS)")
	cmd.Flags().Int64Var(&mib, "mib", 320, "working set in MiB")
	return cmd
}
