package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/plan"
)

func newPackCmd() *cobra.Command {
	var (
		modelDir string
		verify   bool
		remove   bool
		workers  int
	)
	cmd := &cobra.Command{
		Use:   "pack --model DIR",
		Short: "Re-encode a model's routed experts losslessly so that streaming reads fewer bytes",
		Long: `Pack writes, beside each shard of the model, a pack file (<shard>.spoolpack)
holding the shard's routed experts entropy-coded (static rANS, one table per
matrix): the same bytes, fewer of them to read. The streamed tier reads an
expert from its pack when one is up to date and decodes it in place as the
read lands, where this machine's decode loop hides under the reads (AVX-512,
NEON; elsewhere, AVX2 included, decoding costs more than the fewer bytes
save, and the shards are read); the shards are left as they are, and nothing
else changes.

Every record is decoded back and compared with the shard before it is
written. Packing goes shard by shard: a shard whose pack is current is
skipped, so an interrupted run resumes where it stopped. A shard that
changes afterwards makes its pack stale, and it is ignored until packed
again. Experts that do not code at least 3% smaller stay unpacked.

--verify checks every pack against the shards (all records decoded);
--remove deletes the packs.`,
		Example: `  spool pack --model ~/models/glm-5.2
  spool pack --model ~/models/glm-5.2 --verify`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if verify && remove {
				return fmt.Errorf("--verify and --remove are exclusive")
			}
			cfg, err := config.Load(modelDir)
			if err != nil {
				return err
			}
			c, err := container.Open(modelDir)
			if err != nil {
				return err
			}
			defer c.Close()
			w := cmd.OutOrStdout()
			ctx := cmd.Context()
			switch {
			case remove:
				paths, err := expertpack.RemovePacks(c)
				for _, p := range paths {
					fmt.Fprintf(w, "removed %s\n", p)
				}
				return err
			case verify:
				res, err := expertpack.VerifyModel(ctx, c, cfg, func(r expertpack.VerifyResult) {
					if r.Err != nil {
						fmt.Fprintf(w, "FAILED after %d experts: %v\n", r.Experts, r.Err) // the error names the pack
						return
					}
					fmt.Fprintf(w, "%s: %d experts verified\n", r.Path, r.Experts)
				})
				if err != nil {
					return err
				}
				bad := 0
				for _, r := range res {
					if r.Err != nil {
						bad++
					}
				}
				if bad > 0 {
					return fmt.Errorf("%d of %d packs failed verification", bad, len(res))
				}
				fmt.Fprintf(w, "%d packs verified\n", len(res))
				return nil
			}
			start := time.Now()
			var raw, packed int64
			res, err := expertpack.PackModel(ctx, c, cfg, expertpack.Options{Workers: workers}, func(r expertpack.ModelResult) {
				switch {
				case r.Current:
					fmt.Fprintf(w, "%s: pack is current (%d experts)\n", r.Shard, r.Packed)
				case r.Path == "":
				case r.Packed == 0:
					fmt.Fprintf(w, "%s: none of its %d experts codes smaller; they stay unpacked\n", r.Shard, r.Experts)
				default:
					raw += r.RawBytes
					packed += r.PackedBytes
					fmt.Fprintf(w, "%s: %d of %d experts packed, %s -> %s (%.3f)\n", r.Shard, r.Packed, r.Experts,
						plan.SizeText(r.RawBytes), plan.SizeText(r.PackedBytes), float64(r.PackedBytes)/float64(r.RawBytes))
				}
			})
			if err != nil {
				return err
			}
			if raw > 0 {
				fmt.Fprintf(w, "packed %s of experts into %s (%.3f) in %.1fs\n", plan.SizeText(raw), plan.SizeText(packed),
					float64(packed)/float64(raw), time.Since(start).Seconds())
			} else if len(res) > 0 {
				fmt.Fprintln(w, "nothing new to pack")
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "model directory")
	fl.BoolVar(&verify, "verify", false, "check every pack against the shards instead of packing")
	fl.BoolVar(&remove, "remove", false, "delete the packs")
	fl.IntVar(&workers, "workers", 0, "experts coded at once (default: one per core)")
	cmd.MarkFlagRequired("model")
	return cmd
}
