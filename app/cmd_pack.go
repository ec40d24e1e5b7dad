package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/host"
	"github.com/spoolhq/spool/engine/packed"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/pull"
)

func newPackCmd() *cobra.Command {
	var (
		modelDir     string
		verify       bool
		remove       bool
		keepOriginal bool
		workers      int
	)
	cmd := &cobra.Command{
		Use:   "pack --model DIR",
		Short: "Store a model's routed experts packed: about three quarters of the disk, and of the bytes read per token",
		Long: `Pack converts a model in place: each shard's routed experts are re-encoded
losslessly (static rANS, one table per matrix) into a pack file beside it
(<shard>.spoolpack), every record is decoded back from the disk and checked,
and then the raw expert bytes are released from the shard (hole punching:
APFS, ext4, XFS, Btrfs), so the model takes about three quarters of its
former space. The shards keep their names, sizes and headers, and the dense
weights stay where the headers say; the model's record, spool-model.json,
says which shards' experts live only in their packs. Spool reads every
packed expert from its pack and decodes it in place as the read lands.

It goes shard by shard, recording each step: an interrupted run resumes
where it stopped, and no raw byte is released before the pack that replaces
it is on disk and verified. spool unpack restores the original files byte
for byte (checked against their SHA-256, taken before packing).

--keep-original writes the packs but keeps the raw bytes (the disk holds
both, and other tools can still read the shards). A Hugging Face cache's
snapshot (models--owner--name/snapshots/<commit>) is packed in Spool's store
instead, since other tools read the cache: its files move there (and leave
the cache), or, with --keep-original, stay and the store keeps links to them
and the packs. Other files that are links are never modified.

--verify checks every pack as the disk holds it (against the shards' bytes
where they remain, else against each record's checksum); --remove deletes
packs whose experts are still in the shards. Experts that do not code at
least 3% smaller stay unpacked.`,
		Example: `  spool pack --model ~/models/glm-5.2
  spool pack --model ~/models/glm-5.2 --verify
  spool unpack --model ~/models/glm-5.2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if verify && remove {
				return fmt.Errorf("--verify and --remove are exclusive")
			}
			w := cmd.OutOrStdout()
			ctx := cmd.Context()
			switch {
			case remove:
				return removePacks(w, modelDir)
			case verify:
				res, err := packed.Verify(ctx, modelDir, func(r packed.VerifyResult) {
					if r.Err != nil {
						fmt.Fprintf(w, "FAILED after %d experts: %v\n", r.Experts, r.Err) // the error names the pack
						return
					}
					how := "against the shard"
					if r.Released {
						how = "against its checksums (the raw experts were released)"
					}
					fmt.Fprintf(w, "%s: %d experts verified %s\n", r.Pack, r.Experts, how)
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
			if _, repo, commit, ok := pull.Snapshot(modelDir); ok {
				// A Hugging Face cache's snapshot: other tools read its
				// files there, so the model is packed in Spool's store.
				dir, err := pull.Adopt(modelDir, "", keepOriginal)
				if err != nil {
					return err
				}
				how := "moved out of the Hugging Face cache"
				if keepOriginal {
					how = "the packs beside links to the Hugging Face cache's files, which stay"
				}
				fmt.Fprintf(w, "%s@%.12s: in Spool's store at %s (%s)\n", repo, commit, dir, how)
				modelDir = dir
			}
			start := time.Now()
			var raw, pk int64
			sum, err := packed.Convert(ctx, modelDir, packed.Options{Release: !keepOriginal, Workers: workers},
				fingerprint.Options{Store: host.FingerprintStore(), Logger: slog.New(slog.DiscardHandler)},
				func(r packed.ShardResult) {
					switch {
					case r.Pack == "":
					case r.Kept || !r.Wrote && r.Stage != packed.Releasing:
						fmt.Fprintf(w, "%s: %s (pack current)\n", r.Shard, r.Stage)
					case r.Packed == 0:
						fmt.Fprintf(w, "%s: none of its %d experts codes smaller; they stay unpacked\n", r.Shard, r.Experts)
					default:
						raw += r.RawBytes
						pk += r.PackedBytes
						fmt.Fprintf(w, "%s: %d of %d experts packed, %s -> %s (%.3f)", r.Shard, r.Packed, r.Experts,
							plan.SizeText(r.RawBytes), plan.SizeText(r.PackedBytes), float64(r.PackedBytes)/float64(max(r.RawBytes, 1)))
						if r.Stage == packed.Released {
							fmt.Fprintf(w, ", raw experts released")
						}
						fmt.Fprintln(w)
					}
				})
			if errors.Is(err, packed.ErrCannotRelease) {
				fmt.Fprintf(w, "warning: %v\n", err)
				err = nil
			}
			if err != nil {
				return err
			}
			if raw > 0 {
				secs := time.Since(start).Seconds()
				fmt.Fprintf(w, "packed %s of experts into %s (%.3f) in %.1fs (%.0f MB/s)\n", plan.SizeText(raw), plan.SizeText(pk),
					float64(pk)/float64(raw), secs, float64(raw)/secs/1e6)
			}
			fmt.Fprintf(w, "%s takes %s on disk (was %s)\n", modelDir, plan.SizeText(sum.DiskAfter), plan.SizeText(sum.DiskBefore))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "model directory")
	fl.BoolVar(&verify, "verify", false, "check every pack instead of packing")
	fl.BoolVar(&remove, "remove", false, "delete the packs whose experts are still in the shards")
	fl.BoolVar(&keepOriginal, "keep-original", false, "keep the raw expert bytes in the shards (the packs sit beside them)")
	fl.IntVar(&workers, "workers", 0, "experts coded at once (default: one per core)")
	cmd.MarkFlagRequired("model")
	return cmd
}

// removePacks deletes the packs of dir whose experts the shards still hold.
func removePacks(w io.Writer, dir string) error {
	rec, err := packed.ReadRecord(dir)
	if err != nil {
		return err
	}
	for _, f := range rec.AllFiles() {
		if rec.Released(f.Name) {
			return fmt.Errorf("%s's experts exist only in its pack: spool unpack --model %s restores the raw files first", f.Name, dir)
		}
	}
	if _, err := config.Load(dir); err != nil {
		return err
	}
	c, err := container.Open(dir)
	if err != nil {
		return err
	}
	defer c.Close()
	paths, err := expertpack.RemovePacks(c)
	for _, p := range paths {
		fmt.Fprintf(w, "removed %s\n", p)
	}
	if err == nil && rec != nil {
		for i := range rec.Files {
			if rec.Files[i].Stage == packed.Packed {
				rec.Files[i].Stage = packed.Present
			}
		}
		err = rec.Write(dir)
	}
	return err
}

func newUnpackCmd() *cobra.Command {
	var (
		modelDir  string
		keepPacks bool
	)
	cmd := &cobra.Command{
		Use:   "unpack --model DIR",
		Short: "Restore the raw shards of a model that spool pack (or spool pull) stored packed",
		Long: `Unpack writes every released expert's raw bytes back into its shard, decoded
from its pack (each record checked against its checksum), then checks each
restored shard's SHA-256 against the one taken before packing (the hub's,
for a download) and removes each pack once the shards it restored match:
the model is again the original files, byte for byte, which other tools
read. The disk needs room for one shard's raw experts beyond the model's
packed size while it runs. An interrupted run resumes; a shard that does
not match is reported and its pack kept.

--keep-packs keeps the packs beside the restored shards.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			sum, err := packed.Unpack(cmd.Context(), modelDir, packed.UnpackOptions{KeepPacks: keepPacks}, func(r packed.ShardResult) {
				if r.Packed > 0 {
					fmt.Fprintf(w, "%s: %d experts restored (%s)\n", r.Shard, r.Packed, plan.SizeText(-r.ReleasedBytes))
				}
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s: every restored shard matches its SHA-256; %s on disk (was %s)\n", modelDir,
				plan.SizeText(sum.DiskAfter), plan.SizeText(sum.DiskBefore))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelDir, "model", "", "model directory")
	fl.BoolVar(&keepPacks, "keep-packs", false, "keep the packs beside the restored shards")
	cmd.MarkFlagRequired("model")
	return cmd
}
