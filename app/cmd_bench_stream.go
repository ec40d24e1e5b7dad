package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/bench"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/rans"
)

func newBenchStreamCmd() *cobra.Command {
	var (
		modelDir   string
		mem        memoryFlags
		tokens     int
		asJSON     bool
		speculate  bool
		working    int
		workers    int
		probeBytes string
		seed       uint64
		readChunk  string
		traceOut   string
		noPacks    bool
		readPacks  bool
		prefetch   bool
		repin      int
		pinned     string
		loopName   string
	)
	cmd := &cobra.Command{
		Use:   "stream --model DIR",
		Short: "Measure decode speed with experts streamed from disk against the disk's bandwidth",
		Long: `Stream decodes greedily with the routed experts streamed from disk through
the bounded cache the memory plan allows (--memory, --expert-cache), and
measures in the same run, before and after the decode, the disk under
decoding's own access pattern: whole experts picked at random, read as the
read pool's chunked direct requests into the working bank with every worker
busy. The ceiling is that rate / bytes read per generated token: the speed
of a decode that did nothing but read. The figure that matters is tok/s
over that ceiling.

Reads bypass the page cache (O_DIRECT on Linux, F_NOCACHE on macOS), so a
model file written or read recently does not inflate the figures; direct_io
false in the output says the file system refused it.

When experts are read from packs (spool pack), every decode loop this
machine runs (the Go reference, portable C, AVX2, AVX-512 or NEON) then
rebuilds a sample of packed experts on one core, against a memcpy of the
same bytes and against the rebuilt bytes per second the disk delivers.

The prompt is a few seeded random token ids; MTP speculation is off unless
--speculative.`,
		Example: `  spool gen-bench --out .cache/bench --sparse-layers 4 --experts 64
  spool bench stream --model .cache/bench --memory 8GiB --expert-cache 600MiB --tokens 32`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokens < 2 {
				return fmt.Errorf("--tokens must be at least 2, got %d", tokens)
			}
			probe, err := plan.ParseSize(probeBytes)
			if err != nil {
				return fmt.Errorf("--probe: %w", err)
			}
			chunk, err := plan.ParseSize(readChunk)
			if err != nil {
				return fmt.Errorf("--read-chunk: %w", err)
			}
			pin := int64(-1) // half the cache, once the plan sizes it
			if pinned != "" {
				if pin, err = plan.ParseSize(pinned); err != nil {
					return fmt.Errorf("--pinned: %w", err)
				}
			}
			loop, err := decodeLoop(loopName)
			if err != nil {
				return err
			}
			so := experts.StreamOptions{DecodeLoop: loop, WorkingSlots: working, Workers: workers, ReadChunk: chunk, Prefetch: prefetch, RepinEvery: repin, PinnedBytes: pin}
			switch {
			case noPacks:
				so.Packs = experts.PacksIgnore
			case readPacks || loopName != "":
				so.Packs = experts.PacksRead
			}
			if traceOut != "" {
				so.Trace = &experts.RouteTrace{}
			}
			res, err := bench.Stream(cmd.Context(), modelDir, &mem.Memory, tokens, speculate, so, probe, seed)
			if err != nil {
				return err
			}
			if traceOut != "" {
				if err := os.WriteFile(traceOut, so.Trace.Encode(), 0o644); err != nil {
					return fmt.Errorf("--trace-out: %w", err)
				}
			}
			return printStreamBench(cmd, res, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "model directory")
	mem.register(fl)
	fl.IntVar(&tokens, "tokens", 32, "tokens to decode")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	fl.BoolVar(&speculate, "speculative", false, "draft with the MTP layer in every step (no gate: it measures drafting itself)")
	fl.IntVar(&working, "working-slots", 0, "working bank slots (0: 2 x experts_per_tok)")
	fl.IntVar(&workers, "workers", 0, "read workers, one request in flight each (0: the engine's default, experts.DefaultReadWorkers)")
	fl.StringVar(&probeBytes, "probe", "1GiB", "bytes read by each of the two disk probes (before and after the decode)")
	fl.Uint64Var(&seed, "seed", 1, "seed of the prompt ids")
	fl.StringVar(&readChunk, "read-chunk", "4MiB", "largest single read request")
	fl.IntVar(&repin, "repin", experts.DefaultRepinEvery, "re-pin live every N forwards (0: never), as the app does")
	fl.StringVar(&pinned, "pinned", "", "slab memory of the pinned tier, out of the expert cache (default: half of it, as the app)")
	fl.BoolVar(&prefetch, "prefetch", false, "read the next layer's predicted experts ahead, at background priority")
	fl.BoolVar(&noPacks, "ignore-packs", false, "read every expert from its shard, not from packs (spool pack)")
	fl.BoolVar(&readPacks, "read-packs", false, "read packs even where the decode loop is too slow to hide under the reads (implied by --decode-loop)")
	fl.StringVar(&loopName, "decode-loop", "", "decode packed experts with this loop (go, scalar, avx2, avx512, neon; default the fastest); reads packs")
	fl.StringVar(&traceOut, "trace-out", "", "write the routing trace (every expert acquisition) to this file")
	cmd.MarkFlagRequired("model")
	return cmd
}

func printStreamBench(cmd *cobra.Command, r *bench.StreamResult, asJSON bool) error {
	out := cmd.OutOrStdout()
	if asJSON {
		return json.NewEncoder(out).Encode(r)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s (%d expert layers x %d experts)\n", r.Model, r.ExpertLayers, r.ExpertsPerLayer)
	fmt.Fprintf(tw, "cache\t%s: %d LRU slots per layer (%.1f%% of the experts), %d working slots, %d read workers, direct I/O %v\n",
		plan.SizeText(r.CacheBytes), r.LRUSlotsPerLayer, 100*r.CachedFraction, r.WorkingSlots, r.Workers, r.DirectIO)
	fmt.Fprintf(tw, "decode\t%d tokens in %.2fs: %.3f tok/s\n", r.Tokens, r.Seconds, r.TokensPerSecond)
	fmt.Fprintf(tw, "hit rate\t%.1f%% (%d experts pinned, %d live re-pins)\n", 100*r.HitRate, r.PinnedExperts, r.Repins)
	fmt.Fprintf(tw, "bytes read per token\t%s (%.2f GB/s streamed)\n", plan.SizeText(int64(r.MissBytesPerToken)), r.StreamBytesPerSecond/1e9)
	fmt.Fprintf(tw, "disk wait\t%.0f%% of decode time\n", 100*r.WaitShare)
	fmt.Fprintf(tw, "disk busy\t%.0f%% of decode time, %.1f reads at once on average\n", 100*r.DiskBusyShare, r.MeanReadDepth)
	if r.PackedExperts > 0 {
		fmt.Fprintf(tw, "packed experts\t%d read from packs, decoded (%s) at %.2f GB/s a core (%.0f%% of decode time, overlapping reads)\n",
			r.PackedExperts, r.DecodeLoop, r.DecodeBytesPerSecond/1e9, 100*r.DecodeShare)
	}
	if r.Prefetched > 0 {
		fmt.Fprintf(tw, "read ahead\t%d experts, %d then asked for (%.0f%% of the misses)\n", r.Prefetched, r.PrefetchHits, 100*r.PrefetchRecall)
	}
	if u := r.Unpack; u != nil {
		fmt.Fprintf(tw, "memcpy\t%.2f GB/s a core (%d packed experts, %s -> %s)\n",
			u.MemcpyBytesPerSecond/1e9, u.Records, plan.SizeText(u.PackedBytes), plan.SizeText(u.RawBytes))
		for _, l := range u.Loops {
			fmt.Fprintf(tw, "decode loop %s\t%.2f GB/s a core: %.2f x memcpy, %.2f x the disk's rebuilt bytes/s\n",
				l.Loop, l.BytesPerSecond/1e9, l.MemcpyRatio, l.DiskRatio)
		}
	}
	for _, n := range r.PackNotes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	fmt.Fprintf(tw, "disk, decode's reads\t%.2f GB/s over %s, %d requests at once (probes before and after differ by %.0f%%; direct %v)\n",
		r.DiskBytesPerSecond/1e9, plan.SizeText(r.DiskProbeBytes), r.DiskProbeQueueDepth, 100*r.DiskProbeSpread, r.DiskProbeDirect)
	fmt.Fprintf(tw, "ceiling\t%.3f tok/s (disk rate / bytes read per token)\n", r.CeilingTokensPerSecond)
	fmt.Fprintf(tw, "ratio\t%.2f\t(tok/s / ceiling)\n", r.Ratio)
	return tw.Flush()
}

// decodeLoop finds the rANS decode loop whose name starts with name (the
// zero Loop, the fastest, for "").
func decodeLoop(name string) (rans.Loop, error) {
	if name == "" {
		return rans.Loop{}, nil
	}
	var names []string
	for _, l := range rans.Loops() {
		if strings.HasPrefix(l.String(), strings.ToLower(name)) {
			return l, nil
		}
		names = append(names, l.String())
	}
	return rans.Loop{}, fmt.Errorf("--decode-loop %q: this machine runs %s", name, strings.Join(names, ", "))
}
