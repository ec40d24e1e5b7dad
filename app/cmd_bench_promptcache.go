package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/bench"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/promptcache"
)

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
		Long: `Prompt-cache builds the engine spool serve runs (memory plan, streamed expert
tier, prompt cache, scheduler; no idle sequences are kept, so reuse comes
from the prompt cache) and times three requests from submission to their
first token. The first sends a prompt of --tokens seeded random token ids
with nothing cached. The second sends the prompt plus one more turn (--turn
ids) and restores the prompt's blocks from the memory tier. Then the engine
stops (writing every block to disk) and starts again, as after a restart,
and the third request sends the same prompt and another turn of as many
ids, restoring the prompt's blocks from disk with direct reads. Before the first and the third, a request of other ids
fills the expert cache, so the ratios (the cold time over each warm one)
compare prompt work only. With --stream the expert cache holds one slot
per layer and every forward reads its routed experts from disk, as GLM-5.2
does on a 32 GB Mac.

The cache directory is a temporary one (removed afterwards) unless --dir
names one; it should be on the disk whose speed you want to see.`,
		Example: `  spool bench prompt-cache --model assets/models/glm52-demo --tokens 3000 --json
  spool bench prompt-cache --tokens 3000 --stream --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokens < 2*promptcache.DefaultBlockTokens {
				return fmt.Errorf("--tokens must be at least %d, got %d", 2*promptcache.DefaultBlockTokens, tokens)
			}
			if turn < 1 {
				return fmt.Errorf("--turn must be positive, got %d", turn)
			}
			res, err := bench.PromptCache(cmd.Context(), modelDir, mem.Memory, stream, tokens, turn, dir, seed, engineBuild())
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
	fl.BoolVar(&stream, "stream", false, "keep one expert cache slot per layer, so that every forward reads its routed experts from disk")
	fl.Uint64Var(&seed, "seed", 1, "seed of the prompt ids")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printPromptCacheBench(cmd *cobra.Command, r *bench.PromptCacheResult, asJSON bool) error {
	out := cmd.OutOrStdout()
	if asJSON {
		return json.NewEncoder(out).Encode(r)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	experts := "cached after first use"
	if r.StreamEveryForward {
		experts = "read from disk on every forward"
	}
	fmt.Fprintf(tw, "model\t%s (experts %s)\n", r.Model, experts)
	fmt.Fprintf(tw, "prompt\t%d tokens, then %d more; %d-token blocks of %s; memory tier %s\n", r.PromptTokens, r.TurnTokens, r.BlockTokens, plan.SizeText(r.BlockBytes), plan.SizeText(r.MemoryTierBytes))
	fmt.Fprintf(tw, "cold\t%.3fs to the first token (%.0f prompt tok/s)\n", r.ColdTTFTSeconds, r.ColdPrefillTokensPerS)
	fmt.Fprintf(tw, "warm, memory\t%.3fs (%d tokens restored in %.3fs)\t%.1fx\n", r.WarmMemoryTTFTSeconds, r.MemoryCachedTokens, r.MemoryRestoreSeconds, r.MemorySpeedup)
	fmt.Fprintf(tw, "warm, disk\t%.3fs (%d tokens, %s read in %.3fs)\t%.1fx\n", r.WarmDiskTTFTSeconds, r.DiskCachedTokens, plan.SizeText(r.DiskReadBytes), r.DiskRestoreSeconds, r.DiskSpeedup)
	fmt.Fprintf(tw, "restart\t%.3fs to stop the engine, writing %s to disk\n", r.SpillSeconds, plan.SizeText(r.DiskWrittenBytes))
	return tw.Flush()
}
