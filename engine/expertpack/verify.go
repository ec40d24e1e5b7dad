package expertpack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
)

// VerifyResult is one pack's check.
type VerifyResult struct {
	Path    string
	Experts int
	Err     error // nil: every record decodes to the shard's bytes; else an error naming the pack
}

// VerifyModel checks every pack beside the container's shards: its
// sources are the shards as they are now, and every record decodes to
// exactly the expert's bytes in them (and matches its checksum). It
// returns one result per pack found; err is for failures to check at all.
func VerifyModel(ctx context.Context, c *container.Container, cfg *config.Config, onPack func(VerifyResult)) ([]VerifyResult, error) {
	layers := ExpertLayers(c, cfg)
	var out []VerifyResult
	for _, sh := range c.Shards() {
		path := PackPath(filepath.Join(c.Dir(), sh.Name))
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		r := VerifyResult{Path: path}
		r.Experts, r.Err = verifyPack(ctx, c, cfg, layers, path)
		if err := ctx.Err(); err != nil {
			return out, err
		}
		out = append(out, r)
		if onPack != nil {
			onPack(r)
		}
	}
	return out, nil
}

// verifyPack checks the pack at path; its errors name the pack.
func verifyPack(ctx context.Context, c *container.Container, cfg *config.Config, layers []int, path string) (int, error) {
	x, err := ReadIndex(path) // its errors name the pack
	if err != nil {
		return 0, err
	}
	inPack := func(err error) error { return fmt.Errorf("expertpack: %s: %w", path, err) }
	if err := x.Check(c.Dir()); err != nil {
		return 0, inPack(err)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("expertpack: %w", err)
	}
	defer f.Close()
	for i, e := range x.Entries {
		if err := ctx.Err(); err != nil {
			return i, err
		}
		if !slices.Contains(layers, e.Layer) || e.Expert >= cfg.NumRoutedExperts {
			return i, inPack(fmt.Errorf("%w: entry for layer %d expert %d, which the model does not stream", ErrCorrupt, e.Layer, e.Expert))
		}
		loc, err := c.Expert(e.Layer, e.Expert, cfg)
		if err != nil {
			return i, fmt.Errorf("expertpack: %w", err)
		}
		raw, err := ReadExpert(c, loc)
		if err != nil {
			return i, err
		}
		rec := make([]byte, e.Length)
		if _, err := f.ReadAt(rec, e.Offset); err != nil {
			return i, inPack(fmt.Errorf("reading layer %d expert %d: %w", e.Layer, e.Expert, err))
		}
		region, scales := make([]byte, len(raw.Region)), make([]byte, len(raw.Scales))
		if err := Decode(region, scales, rec); err != nil {
			return i, inPack(fmt.Errorf("layer %d expert %d: %w", e.Layer, e.Expert, err))
		}
		if !bytes.Equal(region, raw.Region) || !bytes.Equal(scales, raw.Scales) {
			return i, inPack(fmt.Errorf("%w: layer %d expert %d decodes to bytes that differ from the shard's", ErrCorrupt, e.Layer, e.Expert))
		}
		if crc := crc32.Update(crc32.Checksum(region, castagnoli), castagnoli, scales); crc != e.CRC {
			return i, inPack(fmt.Errorf("%w: layer %d expert %d: checksum %08x, stored %08x", ErrCorrupt, e.Layer, e.Expert, crc, e.CRC))
		}
	}
	return len(x.Entries), nil
}

// RemovePacks deletes every pack (and partial pack) beside the
// container's shards and returns the paths removed.
func RemovePacks(c *container.Container) ([]string, error) {
	var out []string
	for _, sh := range c.Shards() {
		base := PackPath(filepath.Join(c.Dir(), sh.Name))
		for _, p := range []string{base, base + ".partial"} {
			err := os.Remove(p)
			switch {
			case err == nil:
				out = append(out, p)
			case !errors.Is(err, os.ErrNotExist):
				return out, fmt.Errorf("expertpack: %w", err)
			}
		}
	}
	return out, nil
}
