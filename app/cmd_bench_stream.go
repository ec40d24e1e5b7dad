package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/bench"
	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/rans"
	"github.com/spoolhq/spool/native/diskio"
)

// streamBench is the result of spool bench stream.
type streamBench struct {
	Model            string  `json:"model"`
	MemoryBytes      int64   `json:"memory_bytes"`
	CacheBytes       int64   `json:"cache_bytes"`
	LRUSlotsPerLayer int     `json:"lru_slots_per_layer"`
	CachedFraction   float64 `json:"cached_fraction"`
	WorkingSlots     int     `json:"working_slots"`
	Workers          int     `json:"workers"`
	ExpertLayers     int     `json:"expert_layers"`
	ExpertsPerLayer  int     `json:"experts_per_layer"`
	DirectIO         bool    `json:"direct_io"`
	ReadChunkBytes   int64   `json:"read_chunk_bytes"`

	Tokens            int     `json:"tokens"`
	Seconds           float64 `json:"seconds"`
	TokensPerSecond   float64 `json:"tokens_per_second"`
	HitRate           float64 `json:"hit_rate"`
	MissBytesPerToken float64 `json:"miss_bytes_per_token"`
	// StreamBytesPerSecond is the bytes read per decode second.
	StreamBytesPerSecond float64 `json:"stream_bytes_per_second"`
	// WaitShare is the share of decode wall time spent waiting for reads.
	WaitShare float64 `json:"wait_share"`
	// DiskBusyShare is the share of decode wall time with at least one
	// read being served; MeanReadDepth the mean number being served over
	// the decode (the probe keeps every worker busy).
	DiskBusyShare float64 `json:"disk_busy_share"`
	MeanReadDepth float64 `json:"mean_read_depth"`
	// PackedExperts is the experts read from packs (spool pack);
	// DecodeBytesPerSecond their rebuilt bytes over the time spent
	// decoding them (one core's rate: each record decodes on one read
	// worker); DecodeShare that time over the decode's wall time.
	PackedExperts        int64    `json:"packed_experts"`
	DecodeLoop           string   `json:"decode_loop,omitempty"`
	DecodeBytesPerSecond float64  `json:"decode_bytes_per_second"`
	DecodeShare          float64  `json:"decode_share"`
	PackNotes            []string `json:"pack_notes,omitempty"`
	// Unpack measures, after the decode and when packs were read, every
	// decode loop on one core over a sample of the packed experts: rebuilt
	// bytes/s, over memcpy and over the disk's rebuilt bytes/s.
	Unpack *bench.UnpackResult `json:"unpack,omitempty"`
	// Prefetched counts experts read ahead, PrefetchHits those then
	// asked for; PrefetchRecall is PrefetchHits over the misses.
	// PinnedExperts is the pinned tier at the end, Repins the live
	// re-pinning swaps during the decode.
	PinnedExperts  int     `json:"pinned_experts"`
	Repins         int     `json:"repins"`
	Prefetched     int64   `json:"prefetched"`
	PrefetchHits   int64   `json:"prefetch_hits"`
	PrefetchRecall float64 `json:"prefetch_recall"`

	// DiskBytesPerSecond is the read probe's rate: decoding's access
	// pattern (whole experts at random, chunked direct reads at the read
	// pool's queue depth) with nothing else running; the mean of a probe
	// before and one after the decode.
	DiskBytesPerSecond float64 `json:"disk_bytes_per_second"`
	// DiskProbeSpread is |before - after| / mean of the two probes.
	DiskProbeSpread        float64 `json:"disk_probe_spread"`
	DiskProbeBytes         int64   `json:"disk_probe_bytes"`
	DiskProbeDirect        bool    `json:"disk_probe_direct"`
	DiskProbeQueueDepth    int     `json:"disk_probe_queue_depth"`
	CeilingTokensPerSecond float64 `json:"ceiling_tokens_per_second"`
	// Ratio is TokensPerSecond / CeilingTokensPerSecond.
	Ratio float64 `json:"ratio"`
}

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
			res, err := runStreamBench(cmd.Context(), modelDir, &mem, tokens, speculate, so, probe, seed)
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
	fl.BoolVar(&speculate, "speculative", false, "draft with the MTP layer")
	fl.IntVar(&working, "working-slots", 0, "working bank slots (0: 2 x experts_per_tok)")
	fl.IntVar(&workers, "workers", 8, "read workers")
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

func runStreamBench(ctx context.Context, dir string, mem *memoryFlags, tokens int, speculate bool, so experts.StreamOptions, probeBytes int64, seed uint64) (*streamBench, error) {
	cfg, w, err := weightsFromModel(dir)
	if err != nil {
		return nil, err
	}
	opts, err := mem.Options()
	if err != nil {
		return nil, err
	}
	const promptLen = 4
	if so.Trace != nil {
		so.Trace.Layers, so.Trace.Experts = cfg.NumLayers, cfg.NumRoutedExperts
	}
	if so.WorkingSlots == 0 {
		so.WorkingSlots = 2 * cfg.ExpertsPerToken
	}
	opts.BatchRows, opts.WorkingSlots, opts.Context = promptLen, so.WorkingSlots, promptLen+tokens+8
	p, err := plan.New(cfg, w, opts)
	if err != nil {
		return nil, err
	}
	if err := p.Err(); err != nil {
		return nil, err
	}

	var src *experts.Streamed
	d, err := loader.Open(ctx, dir, loader.Options{
		Model: model.Options{DisableMTP: !speculate},
		Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			so.CacheBytes, so.WorkingSlots = p.ExpertCacheBytes, p.WorkingSlots
			if so.PinnedBytes < 0 {
				so.PinnedBytes = so.CacheBytes / 2
			}
			so.PinnedBytes = min(so.PinnedBytes, so.CacheBytes)
			src, err = experts.NewStreamed(ctx, c, cfg, layers, so)
			if err != nil {
				return nil, err // not a nil *Streamed inside the interface
			}
			return src, nil
		},
	})
	if err != nil {
		if src != nil {
			src.Close()
		}
		return nil, err
	}
	defer d.Close()
	defer src.Close()

	before, err := src.ProbeReads(ctx, probeBytes, seed)
	if err != nil {
		return nil, err
	}

	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	prompt := make([]int, promptLen)
	for i := range prompt {
		prompt[i] = rng.IntN(cfg.VocabSize)
	}
	m := d.Model
	var start time.Time
	var activity diskio.Activity
	first := true
	res, err := generate.Generate(ctx, m, m.NewSequence(0), prompt, generate.Params{MaxTokens: tokens, Speculative: speculate}, func(int) error {
		if first {
			first = false
			src.ResetTurn()
			start = time.Now()
			activity = src.ReadPool().Activity()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	wall := time.Since(start).Seconds()
	activity = src.ReadPool().Activity().Sub(activity)
	st := src.Stats()
	after, err := src.ProbeReads(ctx, probeBytes, seed+1)
	if err != nil {
		return nil, err
	}
	bw := (before.BytesPerSecond + after.BytesPerSecond) / 2
	r := &streamBench{
		Model: dir, MemoryBytes: p.MemoryBytes, CacheBytes: p.ExpertCacheBytes,
		WorkingSlots: st.WorkingSlots, Workers: so.Workers,
		ExpertLayers: len(st.Layers), ExpertsPerLayer: cfg.NumRoutedExperts, DirectIO: src.Direct(), ReadChunkBytes: so.ReadChunk,
		Tokens: len(res.Tokens), Seconds: wall, HitRate: st.Turn.HitRate(),
		DiskBytesPerSecond: bw, DiskProbeBytes: before.Bytes + after.Bytes, DiskProbeDirect: before.Direct && after.Direct,
		DiskProbeQueueDepth: before.Workers,
	}
	if bw > 0 {
		r.DiskProbeSpread = math.Abs(before.BytesPerSecond-after.BytesPerSecond) / bw
	}
	if len(st.Layers) > 0 {
		r.LRUSlotsPerLayer = st.LRUSlots / len(st.Layers)
		r.CachedFraction = float64(st.LRUSlots+st.Pinned) / float64(len(st.Layers)*cfg.NumRoutedExperts)
	}
	decoded := len(res.Tokens) - 1 // the first token comes from the prefill
	if decoded > 0 && wall > 0 {
		r.TokensPerSecond = float64(decoded) / wall
		r.MissBytesPerToken = float64(st.Turn.BytesRead) / float64(decoded)
		r.StreamBytesPerSecond = float64(st.Turn.BytesRead) / wall
		r.WaitShare = st.Turn.Wait.Seconds() / wall
		r.DiskBusyShare = activity.Busy.Seconds() / wall
		r.MeanReadDepth = activity.Depth.Seconds() / wall
		r.DecodeShare = st.Turn.DecodeTime.Seconds() / wall
	}
	r.PackedExperts, r.PackNotes = st.Turn.Unpacked, src.PackNotes()
	if r.PackedExperts > 0 {
		r.DecodeLoop = so.DecodeLoop.String()
	}
	r.Prefetched, r.PrefetchHits = st.Turn.Prefetched, st.Turn.PrefetchHits
	r.PinnedExperts, r.Repins = st.Pinned, st.Repins
	if st.Turn.Misses > 0 {
		r.PrefetchRecall = float64(st.Turn.PrefetchHits) / float64(st.Turn.Misses)
	}
	if st.Turn.DecodeTime > 0 {
		r.DecodeBytesPerSecond = float64(st.Turn.Decoded) / st.Turn.DecodeTime.Seconds()
	}
	if r.MissBytesPerToken > 0 {
		r.CeilingTokensPerSecond = r.DiskBytesPerSecond / r.MissBytesPerToken
		r.Ratio = r.TokensPerSecond / r.CeilingTokensPerSecond
	}
	if r.PackedExperts > 0 {
		recs, err := bench.PackedRecords(dir, 4)
		if err != nil {
			return nil, err
		}
		u, err := bench.Unpack(ctx, recs, bench.UnpackOptions{DiskBytesPerSecond: bw})
		if err != nil {
			return nil, err
		}
		r.Unpack = &u
	}
	return r, nil
}

func printStreamBench(cmd *cobra.Command, r *streamBench, asJSON bool) error {
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
