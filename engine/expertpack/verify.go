package expertpack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/native/diskio"
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

// verifyPack checks the pack at path against the shards; its errors name
// the pack.
func verifyPack(ctx context.Context, c *container.Container, cfg *config.Config, layers []int, path string) (int, error) {
	x, err := ReadIndex(path) // its errors name the pack
	if err != nil {
		return 0, err
	}
	if err := x.Check(c.Dir()); err != nil {
		return 0, fmt.Errorf("expertpack: %s: %w", path, err)
	}
	return VerifyPack(ctx, c, cfg, path, x, true)
}

// VerifyPack checks every record of the pack at path, whose index is x, as
// the disk holds it (read with direct reads where the file system has
// them, so that what is checked is what was written): each decodes in
// place, as the streamed tier decodes it, to bytes with its entry's
// checksum, and, with againstRaw, to exactly the expert's raw bytes in the
// shards (which must still hold them). Records are checked on
// GOMAXPROCS goroutines. It returns how many records passed before the
// first failure, whose error names the pack and the expert.
func VerifyPack(ctx context.Context, c *container.Container, cfg *config.Config, path string, x *Index, againstRaw bool) (int, error) {
	layers := ExpertLayers(c, cfg)
	inPack := func(err error) error { return fmt.Errorf("expertpack: %s: %w", path, err) }
	for _, e := range x.Entries {
		if !slices.Contains(layers, e.Layer) || e.Expert >= cfg.NumRoutedExperts {
			return 0, inPack(fmt.Errorf("%w: entry for layer %d expert %d, which the model does not stream", ErrCorrupt, e.Layer, e.Expert))
		}
	}
	if len(x.Entries) == 0 {
		return 0, nil
	}
	f, err := diskio.OpenDirect(path)
	if err != nil {
		return 0, fmt.Errorf("expertpack: %w", err)
	}
	defer f.Close()
	var need int64
	for _, e := range x.Entries {
		loc, err := c.Expert(e.Layer, e.Expert, cfg)
		if err != nil {
			return 0, fmt.Errorf("expertpack: %w", err)
		}
		need = max(need, e.PackedSlabNeed(), loc.WeightBytes)
	}
	workers := min(runtime.GOMAXPROCS(0), len(x.Entries))
	failed := make([]error, len(x.Entries))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slab := diskio.AlignedBuffer(int(need))
			for {
				i := int(next.Add(1) - 1)
				if i >= len(x.Entries) || ctx.Err() != nil {
					return
				}
				e := x.Entries[i]
				if err := verifyRecord(c, cfg, f, slab, e, againstRaw); err != nil {
					failed[i] = inPack(fmt.Errorf("layer %d expert %d: %w", e.Layer, e.Expert, err))
					next.Store(int64(len(x.Entries))) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	for i, err := range failed {
		if err != nil {
			return i, err
		}
	}
	return len(x.Entries), nil
}

// verifyRecord reads one record into slab at its slab offset, decodes it
// in place and checks it.
func verifyRecord(c *container.Container, cfg *config.Config, f *diskio.DirectFile, slab []byte, e Entry, againstRaw bool) error {
	region, scales, err := DecodeEntry(f, slab, e)
	if err != nil || !againstRaw {
		return err
	}
	loc, err := c.Expert(e.Layer, e.Expert, cfg)
	if err != nil {
		return err
	}
	raw, err := ReadExpert(c, loc)
	if err != nil {
		return err
	}
	if !bytes.Equal(region, raw.Region) || !bytes.Equal(scales, raw.Scales) {
		return fmt.Errorf("%w: it decodes to bytes that differ from the shard's", ErrCorrupt)
	}
	return nil
}

// DecodeEntry reads the record of entry e from the pack open as f into
// slab at e.SlabAt (slab starts at a direct-read-aligned address and holds
// e.PackedSlabNeed() bytes and the expert's weights), decodes it in place
// as the streamed tier does and checks it against e's checksum. region and
// scales are the expert's raw weight and scale bytes, in slab.
func DecodeEntry(f *diskio.DirectFile, slab []byte, e Entry) (region, scales []byte, err error) {
	if int64(len(slab)) < e.PackedSlabNeed() {
		return nil, nil, fmt.Errorf("expertpack: a slab of %d bytes for a record that needs %d", len(slab), e.PackedSlabNeed())
	}
	rec, err := f.ReadAtAligned(slab[e.SlabAt:], e.Offset, e.Length)
	if err != nil {
		return nil, nil, fmt.Errorf("reading its record: %w", err)
	}
	r, err := ParseRecord(rec, e.Length)
	if err != nil {
		return nil, nil, err
	}
	if r.SlabAt(RecordAlign) > e.SlabAt {
		return nil, nil, corrupt("the record needs slab offset %d, the index gives %d", r.SlabAt(RecordAlign), e.SlabAt)
	}
	if r.RegionLen > int64(len(slab)) {
		return nil, nil, fmt.Errorf("expertpack: a slab of %d bytes for %d bytes of weights", len(slab), r.RegionLen)
	}
	u, err := NewUnpacker(r, slab, e.SlabAt)
	if err != nil {
		return nil, nil, err
	}
	if _, err := u.Advance(slab, e.Length); err != nil {
		return nil, nil, err
	}
	if err := u.Verify(slab, e.CRC); err != nil {
		return nil, nil, err
	}
	return slab[:r.RegionLen], slab[e.SlabAt+r.ScalesOff : e.SlabAt+r.ScalesOff+r.ScalesLen], nil
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
