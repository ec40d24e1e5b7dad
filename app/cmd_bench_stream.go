package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/modeldir"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/native"
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

	DiskBytesPerSecond     float64 `json:"disk_bytes_per_second"`
	DiskProbeBytes         int64   `json:"disk_probe_bytes"`
	DiskProbeDirect        bool    `json:"disk_probe_direct"`
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
	)
	cmd := &cobra.Command{
		Use:   "stream --model DIR",
		Short: "Measure decode speed with experts streamed from disk against the disk's bandwidth",
		Long: `Stream decodes greedily with the routed experts streamed from disk through
the bounded cache the memory plan allows (--memory, --expert-cache), and
measures in the same run the disk's sequential direct-read bandwidth over the
model's shard files. The ceiling is bandwidth / miss bytes per token: the
speed if decoding did nothing but read its misses at the disk's sequential
rate. The figure that matters is tok/s over that ceiling.

Reads bypass the page cache (O_DIRECT on Linux, F_NOCACHE on macOS), so a
model file written or read recently does not inflate the figures; direct_io
false in the output says the file system refused it.

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
			res, err := runStreamBench(cmd.Context(), modelDir, &mem, tokens, speculate, experts.StreamOptions{WorkingSlots: working, Workers: workers, ReadChunk: chunk}, probe, seed)
			if err != nil {
				return err
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
	fl.StringVar(&probeBytes, "probe", "4GiB", "bytes read by the sequential bandwidth probe (from the first shard on; read about as much as the run streams so both meet the same caching below the OS)")
	fl.Uint64Var(&seed, "seed", 1, "seed of the prompt ids")
	fl.StringVar(&readChunk, "read-chunk", "4MiB", "largest single read request")
	cmd.MarkFlagRequired("model")
	return cmd
}

func runStreamBench(ctx context.Context, dir string, mem *memoryFlags, tokens int, speculate bool, so experts.StreamOptions, probeBytes int64, seed uint64) (*streamBench, error) {
	cfg, w, err := weightsFromModel(dir)
	if err != nil {
		return nil, err
	}
	opts, err := mem.options()
	if err != nil {
		return nil, err
	}
	const promptLen = 4
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
	d, err := modeldir.Open(ctx, dir, modeldir.Options{
		Model: model.Options{DisableMTP: !speculate},
		Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			so.CacheBytes, so.WorkingSlots = p.ExpertCacheBytes, p.WorkingSlots
			src, err = experts.NewStreamed(ctx, c, cfg, layers, so)
			return src, err
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

	bw, err := native.MeasureSequentialRead(ctx, src.Files(), probeBytes, 0)
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
	first := true
	res, err := generate.Generate(ctx, m, m.NewSequence(0), prompt, generate.Params{MaxTokens: tokens, Speculative: speculate}, func(int) error {
		if first {
			first = false
			src.ResetTurn()
			start = time.Now()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	wall := time.Since(start).Seconds()
	st := src.Stats()
	r := &streamBench{
		Model: dir, MemoryBytes: p.MemoryBytes, CacheBytes: p.ExpertCacheBytes,
		WorkingSlots: st.WorkingSlots, Workers: so.Workers,
		ExpertLayers: len(st.Layers), ExpertsPerLayer: cfg.NumRoutedExperts, DirectIO: src.Direct(), ReadChunkBytes: so.ReadChunk,
		Tokens: len(res.Tokens), Seconds: wall, HitRate: st.Turn.HitRate(),
		DiskBytesPerSecond: bw.BytesPerSecond, DiskProbeBytes: bw.Bytes, DiskProbeDirect: bw.Direct,
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
	}
	if r.MissBytesPerToken > 0 {
		r.CeilingTokensPerSecond = r.DiskBytesPerSecond / r.MissBytesPerToken
		r.Ratio = r.TokensPerSecond / r.CeilingTokensPerSecond
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
	fmt.Fprintf(tw, "hit rate\t%.1f%%\n", 100*r.HitRate)
	fmt.Fprintf(tw, "miss bytes per token\t%s (%.2f GB/s streamed)\n", plan.SizeText(int64(r.MissBytesPerToken)), r.StreamBytesPerSecond/1e9)
	fmt.Fprintf(tw, "disk wait\t%.0f%% of decode time\n", 100*r.WaitShare)
	fmt.Fprintf(tw, "disk sequential read\t%.2f GB/s over %s (direct %v)\n", r.DiskBytesPerSecond/1e9, plan.SizeText(r.DiskProbeBytes), r.DiskProbeDirect)
	fmt.Fprintf(tw, "ceiling\t%.3f tok/s (bandwidth / miss bytes per token)\n", r.CeilingTokensPerSecond)
	fmt.Fprintf(tw, "ratio\t%.2f\t(tok/s / ceiling)\n", r.Ratio)
	return tw.Flush()
}
