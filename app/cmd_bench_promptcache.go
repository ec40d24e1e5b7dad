package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/modeldir"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/promptcache"
)

// promptCacheBench is the result of spool bench prompt-cache.
type promptCacheBench struct {
	Model        string `json:"model"`
	PromptTokens int    `json:"prompt_tokens"`
	TurnTokens   int    `json:"turn_tokens"`
	BlockTokens  int    `json:"block_tokens"`
	BlockBytes   int64  `json:"block_bytes"`
	Streamed     bool   `json:"streamed_experts"`

	// Time to first token of the prompt with nothing cached, and of the
	// prompt plus one more turn with the prompt's blocks restored from
	// memory, then (after a restart) from disk.
	ColdTTFTSeconds       float64 `json:"cold_ttft_seconds"`
	WarmMemoryTTFTSeconds float64 `json:"warm_memory_ttft_seconds"`
	WarmDiskTTFTSeconds   float64 `json:"warm_disk_ttft_seconds"`
	// Ratios: cold over warm.
	MemorySpeedup float64 `json:"memory_speedup"`
	DiskSpeedup   float64 `json:"disk_speedup"`

	MemoryCachedTokens    int     `json:"memory_cached_tokens"`
	DiskCachedTokens      int     `json:"disk_cached_tokens"`
	MemoryRestoreSeconds  float64 `json:"memory_restore_seconds"`
	DiskRestoreSeconds    float64 `json:"disk_restore_seconds"`
	DiskReadBytes         int64   `json:"disk_read_bytes"`
	DiskReadBytesPerSec   float64 `json:"disk_read_bytes_per_second"`
	StoreSeconds          float64 `json:"store_seconds"`
	SpillSeconds          float64 `json:"spill_seconds"`
	DiskWrittenBytes      int64   `json:"disk_written_bytes"`
	SameFirstToken        bool    `json:"same_first_token"`
	ColdPrefillTokensPerS float64 `json:"cold_prefill_tokens_per_second"`
}

func newBenchPromptCacheCmd() *cobra.Command {
	var (
		modelDir string
		mem      memoryFlags
		tokens   int
		turn     int
		dir      string
		stream   bool
		seed     uint64
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "prompt-cache",
		Short: "Measure time to first token with the prompt cache cold, warm from memory and warm from disk",
		Long: `Prompt-cache runs three requests in one process. The first sends a prompt of
--tokens seeded random token ids with nothing cached and stores its blocks.
The second sends the prompt plus one more turn (--turn ids) and restores the
prompt's blocks from the memory tier. Then the cache is closed (writing every
block to disk) and opened again with no memory tier, as after a restart, and
the third request sends the same prompt and turn, restoring from disk with
direct reads. Times to first token include the lookup and the restore; the
ratios are the cold time over each warm one.

The cache directory is a temporary one (removed afterwards) unless --dir
names one; it should be on the disk whose speed you want to see.`,
		Example: `  spool bench prompt-cache --model assets/models/glm52-mini --tokens 3000 --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokens < 2*promptcache.DefaultBlockTokens {
				return fmt.Errorf("--tokens must be at least %d, got %d", 2*promptcache.DefaultBlockTokens, tokens)
			}
			if turn < 1 {
				return fmt.Errorf("--turn must be positive, got %d", turn)
			}
			res, err := runPromptCacheBench(cmd.Context(), modelDir, &mem, stream, tokens, turn, dir, seed)
			if err != nil {
				return err
			}
			return printPromptCacheBench(cmd, res, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "model directory (default $SPOOL_MODEL or the demo model)")
	mem.register(fl)
	fl.IntVar(&tokens, "tokens", 3000, "prompt tokens")
	fl.IntVar(&turn, "turn", 32, "tokens of the turn the warm requests add")
	fl.StringVar(&dir, "dir", "", "disk tier directory (default: a temporary directory, removed afterwards)")
	fl.BoolVar(&stream, "stream", false, "stream routed experts from disk even when they all fit in memory")
	fl.Uint64Var(&seed, "seed", 1, "seed of the prompt ids")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func runPromptCacheBench(ctx context.Context, modelFlag string, mem *memoryFlags, stream bool, tokens, turn int, dir string, seed uint64) (*promptCacheBench, error) {
	path, err := resolveModelDir(modelFlag)
	if err != nil {
		return nil, err
	}
	lm, err := openModel(path)
	if err != nil {
		return nil, err
	}
	d := lm.dir
	contextLen := tokens + turn + 8
	if contextLen > d.Config.MaxPositionEmbeddings {
		lm.Close()
		return nil, fmt.Errorf("--tokens %d + --turn %d exceed the model's %d positions", tokens, turn, d.Config.MaxPositionEmbeddings)
	}
	p, err := planOpened(d, mem, contextLen, 1, nil)
	if err != nil {
		lm.Close()
		return nil, err
	}
	opts := modeldir.Options{Model: plannedModel(p, model.Options{DisableMTP: true})}
	streamed := stream || !p.AllExpertsCached()
	if streamed {
		opts.Experts = streamedExperts(p, "")
	}
	if err := lm.load(ctx, opts); err != nil {
		return nil, err
	}
	defer lm.Close()
	m := d.Model

	if dir == "" {
		if dir, err = os.MkdirTemp("", "spool-bench-prompt-cache-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	id, err := promptcache.IdentityOf(d, version)
	if err != nil {
		return nil, err
	}
	co := promptcache.Options{Identity: id, Dir: dir, DiskBytes: 1 << 40, Logger: slog.New(slog.DiscardHandler)}
	fp, err := promptcache.Footprint(co)
	if err != nil {
		return nil, err
	}
	// A memory tier that holds the prompt; the plan of a real run sizes it.
	co.MemoryBytes = int64(tokens/fp.BlockTokens+2) * (fp.BlockBytes + 4096)

	rng := rand.New(rand.NewPCG(seed, 0x9c))
	prompt := make([]int, tokens)
	for i := range prompt {
		prompt[i] = rng.IntN(m.Config().VocabSize)
	}
	full := append(prompt[:len(prompt):len(prompt)], make([]int, turn)...)
	for i := tokens; i < len(full); i++ {
		full[i] = rng.IntN(m.Config().VocabSize)
	}
	r := &promptCacheBench{Model: path, PromptTokens: tokens, TurnTokens: turn, BlockTokens: fp.BlockTokens, Streamed: streamed}

	cache, err := promptcache.New(co)
	if err != nil {
		return nil, err
	}
	defer func() { cache.Close() }()

	// Cold: the prompt with nothing cached, then its blocks stored.
	seq := m.NewSequence(contextLen)
	cold, _, err := timeToFirstToken(ctx, m, seq, prompt)
	if err != nil {
		return nil, err
	}
	r.ColdTTFTSeconds = cold.Seconds()
	r.ColdPrefillTokensPerS = float64(tokens) / cold.Seconds()
	t := time.Now()
	cache.Store(ctx, seq, promptcache.Hidden{})
	r.StoreSeconds = time.Since(t).Seconds()

	// Warm from memory: the prompt and one more turn.
	warm, memTok, restored, err := warmRequest(ctx, m, cache, contextLen, full)
	if err != nil {
		return nil, err
	}
	r.WarmMemoryTTFTSeconds = warm.Seconds()
	r.MemoryCachedTokens, r.MemoryRestoreSeconds = restored.Tokens, restored.Elapsed.Seconds()

	// A restart: every block goes to disk, a new cache finds them there.
	t = time.Now()
	if err := cache.Flush(ctx); err != nil {
		return nil, err
	}
	r.SpillSeconds = time.Since(t).Seconds()
	st := cache.Stats()
	r.DiskWrittenBytes = st.Disk.WrittenBytes
	if st.Disk.Blocks > 0 {
		r.BlockBytes = st.Disk.WrittenBytes / int64(st.Disk.Blocks) // as written (MTP is off here)
	}
	if err := cache.Close(); err != nil {
		return nil, err
	}
	co.MemoryBytes = 0
	if cache, err = promptcache.New(co); err != nil {
		return nil, err
	}
	warm, diskTok, restored, err := warmRequest(ctx, m, cache, contextLen, full)
	if err != nil {
		return nil, err
	}
	r.WarmDiskTTFTSeconds = warm.Seconds()
	r.DiskCachedTokens, r.DiskRestoreSeconds, r.DiskReadBytes = restored.Tokens, restored.Elapsed.Seconds(), restored.ReadBytes
	if restored.Elapsed > 0 {
		r.DiskReadBytesPerSec = float64(restored.ReadBytes) / restored.Elapsed.Seconds()
	}
	r.SameFirstToken = memTok == diskTok
	if r.WarmMemoryTTFTSeconds > 0 {
		r.MemorySpeedup = r.ColdTTFTSeconds / r.WarmMemoryTTFTSeconds
	}
	if r.WarmDiskTTFTSeconds > 0 {
		r.DiskSpeedup = r.ColdTTFTSeconds / r.WarmDiskTTFTSeconds
	}
	return r, nil
}

// warmRequest restores the longest cached prefix of prompt into a new
// sequence and generates its first token, timing both together.
func warmRequest(ctx context.Context, m *model.Model, cache *promptcache.Cache, contextLen int, prompt []int) (time.Duration, int, promptcache.Restored, error) {
	start := time.Now()
	seq := m.NewSequence(contextLen)
	restored, err := cache.Restore(ctx, seq, cache.Lookup(prompt))
	if err != nil {
		return 0, 0, restored, err
	}
	restoring := time.Since(start)
	d, tok, err := timeToFirstToken(ctx, m, seq, prompt)
	return restoring + d, tok, restored, err
}

// timeToFirstToken generates one greedy token after prompt, continuing
// whatever prefix seq holds.
func timeToFirstToken(ctx context.Context, m *model.Model, seq *kvcache.Sequence, prompt []int) (time.Duration, int, error) {
	start := time.Now()
	var first time.Duration
	tok := -1
	_, err := generate.Generate(ctx, m, seq, prompt, generate.Params{MaxTokens: 1}, func(id int) error {
		first, tok = time.Since(start), id
		return nil
	})
	return first, tok, err
}

func printPromptCacheBench(cmd *cobra.Command, r *promptCacheBench, asJSON bool) error {
	out := cmd.OutOrStdout()
	if asJSON {
		return json.NewEncoder(out).Encode(r)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s (experts %s)\n", r.Model, map[bool]string{true: "streamed", false: "in memory"}[r.Streamed])
	fmt.Fprintf(tw, "prompt\t%d tokens, then %d more; %d-token blocks of %s\n", r.PromptTokens, r.TurnTokens, r.BlockTokens, plan.SizeText(r.BlockBytes))
	fmt.Fprintf(tw, "cold\t%.3fs to the first token (%.0f prompt tok/s)\n", r.ColdTTFTSeconds, r.ColdPrefillTokensPerS)
	fmt.Fprintf(tw, "warm, memory\t%.3fs (%d tokens restored in %.3fs)\t%.1fx\n", r.WarmMemoryTTFTSeconds, r.MemoryCachedTokens, r.MemoryRestoreSeconds, r.MemorySpeedup)
	fmt.Fprintf(tw, "warm, disk\t%.3fs (%d tokens, %s read in %.3fs)\t%.1fx\n", r.WarmDiskTTFTSeconds, r.DiskCachedTokens, plan.SizeText(r.DiskReadBytes), r.DiskRestoreSeconds, r.DiskSpeedup)
	fmt.Fprintf(tw, "store\t%.3fs into memory, %.3fs to write %s to disk\n", r.StoreSeconds, r.SpillSeconds, plan.SizeText(r.DiskWrittenBytes))
	return tw.Flush()
}
