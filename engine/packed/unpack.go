package packed

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/native/diskio"
)

// UnpackOptions configure Unpack.
type UnpackOptions struct {
	// KeepPacks keeps the packs beside the restored shards (the disk then
	// holds both); by default each pack is removed once the shards it
	// restored match their SHA-256.
	KeepPacks bool
}

// ErrMismatch is wrapped by Unpack's error for a restored shard whose
// SHA-256 is not the record's.
var ErrMismatch = errors.New("restored shard does not match its SHA-256")

// Unpack restores the raw shards of the model in dir from its packs: every
// released expert's bytes decoded from its record (each checked against
// its checksum) and written back where the shard's header puts them, the
// shard synced and its modification time restored; then each restored
// shard's SHA-256 is checked against the record (the hub's, for a
// download) and, unless opts.KeepPacks, each pack is removed as soon as
// every shard it restored checks out, so that the disk holds the packs and
// the raw experts of one shard at most at a time. A shard that does not
// match is reported (ErrMismatch) and its pack kept. The record stays,
// with every shard present, when the model has an origin; a directory
// converted in place becomes a plain one again. Unpack resumes after a
// kill.
func Unpack(ctx context.Context, dir string, opts UnpackOptions, onShard func(ShardResult)) (Summary, error) {
	var sum Summary
	unlock, err := Lock(dir)
	if err != nil {
		return sum, err
	}
	defer unlock()
	rec, err := ReadRecord(dir)
	if err != nil {
		return sum, err
	}
	if rec == nil {
		return sum, fmt.Errorf("packed: %s has no %s: nothing of it is packed by Spool", dir, RecordName)
	}
	if err := rec.Ready(dir); err != nil && !errors.Is(err, ErrNotReady) {
		return sum, err
	}
	for _, f := range rec.Files {
		if f.Stage == Absent {
			return sum, fmt.Errorf("packed: %s is still being downloaded (%s is missing)", dir, f.Name)
		}
	}
	cfg, err := config.Load(dir)
	if err != nil {
		return sum, err
	}
	c, err := container.Open(dir)
	if err != nil {
		return sum, err
	}
	defer c.Close()
	if err := rec.matches(c); err != nil {
		return sum, fmt.Errorf("packed: %s: %w", dir, err)
	}
	if sum.DiskBefore, err = DiskUsage(dir); err != nil {
		return sum, err
	}
	// Every pack's index, for its sources: a shard is checked once every
	// pack that released bytes in it has restored them.
	packs := map[string]*expertpack.Index{}
	for _, f := range rec.Files {
		if !f.Shard || f.Stage == Present {
			continue
		}
		x, err := expertpack.ReadIndex(expertpack.PackPath(filepath.Join(dir, f.Name)))
		if err != nil {
			if f.Stage == Packed {
				continue // the raw bytes are all there: the pack is only removed
			}
			return sum, fmt.Errorf("packed: %s's experts exist only in its pack, which does not read (%w); "+
				"fetch the model again, or repair it from its origin", f.Name, err)
		}
		packs[f.Name] = x
	}
	touches := func(shard string) []string { // the packs whose experts lie in shard
		var out []string
		for name, x := range packs {
			if slices.ContainsFunc(x.Sources, func(s expertpack.Source) bool { return s.Name == shard }) {
				out = append(out, name)
			}
		}
		return out
	}
	verified := map[string]bool{}
	var mismatch []string
	for _, f := range slices.Clone(rec.Files) {
		if !f.Shard || f.Stage == Present {
			continue
		}
		res := ShardResult{Shard: f.Name, Pack: expertpack.PackPath(filepath.Join(dir, f.Name))}
		if x, ok := packs[f.Name]; ok && (f.Stage == Released || f.Stage == Releasing) {
			if err := ctx.Err(); err != nil {
				return sum, err
			}
			n, err := restore(c, cfg, res.Pack, x)
			if err != nil {
				return sum, err
			}
			res.Packed, res.ReleasedBytes = len(x.Entries), -n
			if err := setStage(rec, dir, f.Name, Packed); err != nil {
				return sum, err
			}
		}
		// Check every shard this pack restored bytes in whose other packs
		// have restored theirs.
		var check []string
		for _, s := range sourcesOrSelf(packs[f.Name], f.Name) {
			if verified[s] || slices.ContainsFunc(touches(s), func(p string) bool {
				pf, _ := rec.File(p)
				return pf.Stage == Released || pf.Stage == Releasing
			}) {
				continue
			}
			check = append(check, s)
		}
		bad, err := checkDigests(ctx, dir, rec, check)
		if err != nil {
			return sum, err
		}
		for _, s := range check {
			verified[s] = !slices.Contains(bad, s)
		}
		mismatch = append(mismatch, bad...)
		res.Stage = Packed
		sum.Shards = append(sum.Shards, res)
		// This pack, and packs restored before whose sources were not all
		// checked then, go once every shard they restored checks out.
		if opts.KeepPacks {
			continue
		}
		for i := range sum.Shards {
			r := &sum.Shards[i]
			if r.Stage != Packed || slices.ContainsFunc(sourcesOrSelf(packs[r.Shard], r.Shard), func(s string) bool { return !verified[s] }) {
				continue
			}
			if err := os.Remove(r.Pack); err != nil && !errors.Is(err, os.ErrNotExist) {
				return sum, fmt.Errorf("packed: %w", err)
			}
			if err := setStage(rec, dir, r.Shard, Present); err != nil {
				return sum, err
			}
			r.Stage = Present
		}
	}
	if onShard != nil {
		for _, r := range sum.Shards {
			onShard(r)
		}
	}
	if len(mismatch) > 0 {
		return sum, fmt.Errorf("packed: %w: %v; their packs are kept", ErrMismatch, mismatch)
	}
	if !opts.KeepPacks && rec.Origin == nil {
		if err := os.Remove(filepath.Join(dir, RecordName)); err != nil {
			return sum, fmt.Errorf("packed: %w", err)
		}
	}
	if sum.DiskAfter, err = DiskUsage(dir); err != nil {
		return sum, err
	}
	return sum, nil
}

func sourcesOrSelf(x *expertpack.Index, shard string) []string {
	if x == nil {
		return []string{shard}
	}
	out := []string{}
	for _, s := range x.Sources {
		out = append(out, s.Name)
	}
	return out
}

func setStage(rec *Record, dir, shard string, s Stage) error {
	f, _ := rec.File(shard)
	f.Stage = s
	return rec.Write(dir)
}

// restore writes the raw bytes of x's experts back into the shards, from
// the pack at path, and returns how many bytes it wrote.
func restore(c *container.Container, cfg *config.Config, path string, x *expertpack.Index) (int64, error) {
	pf, err := diskio.OpenDirect(path)
	if err != nil {
		return 0, fmt.Errorf("packed: %w", err)
	}
	defer pf.Close()
	files := map[string]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var slab []byte
	var total int64
	for _, e := range x.Entries {
		loc, err := c.Expert(e.Layer, e.Expert, cfg)
		if err != nil {
			return total, fmt.Errorf("packed: %w", err)
		}
		if need := max(e.PackedSlabNeed(), loc.WeightBytes); int64(len(slab)) < need {
			slab = diskio.AlignedBuffer(int(need))
		}
		region, scales, err := expertpack.DecodeEntry(pf, slab, e)
		if err != nil {
			return total, fmt.Errorf("packed: %s: layer %d expert %d: %w; the expert cannot be restored from this pack "+
				"(repair it from the model's origin first)", path, e.Layer, e.Expert, err)
		}
		for _, part := range []struct {
			es  []container.Extent
			src []byte
		}{{loc.Weights, region}, {loc.Scales, scales}} {
			var at int64
			for _, ext := range part.es {
				f := files[ext.File]
				if f == nil {
					if f, err = os.OpenFile(filepath.Join(c.Dir(), ext.File), os.O_RDWR, 0); err != nil {
						return total, fmt.Errorf("packed: %w", err)
					}
					files[ext.File] = f
				}
				if _, err := f.WriteAt(part.src[at:at+ext.Length], ext.Offset); err != nil {
					return total, fmt.Errorf("packed: restoring layer %d expert %d in %s: %w", e.Layer, e.Expert, ext.File, err)
				}
				at += ext.Length
				total += ext.Length
			}
		}
	}
	for name, f := range files {
		if err := f.Sync(); err != nil {
			return total, fmt.Errorf("packed: syncing %s: %w", name, err)
		}
	}
	for _, s := range x.Sources {
		if err := os.Chtimes(filepath.Join(c.Dir(), s.Name), time.Time{}, time.Unix(0, s.ModTime)); err != nil {
			return total, fmt.Errorf("packed: restoring the modification time of %s: %w", s.Name, err)
		}
	}
	return total, nil
}

// checkDigests reads the shards named and returns those whose SHA-256 is
// not the record's (a shard with no digest recorded is not checked).
func checkDigests(ctx context.Context, dir string, rec *Record, shards []string) ([]string, error) {
	var names, paths []string
	for _, s := range shards {
		if f, ok := rec.File(s); ok && f.SHA256 != "" {
			names = append(names, s)
			paths = append(paths, filepath.Join(dir, s))
		}
	}
	if len(paths) == 0 {
		return nil, nil
	}
	// No store: every byte is read again.
	files, err := fingerprint.Files(ctx, paths, fingerprint.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("packed: checking the restored shards: %w", err)
	}
	var bad []string
	for i, f := range files {
		if want, _ := rec.File(names[i]); hex.EncodeToString(f.SHA256[:]) != want.SHA256 {
			bad = append(bad, names[i])
		}
	}
	return bad, nil
}
