package packed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/native/diskio"
)

// Options configure a Converter.
type Options struct {
	// Release gives the raw bytes of packed experts back to the file
	// system once their pack is verified; without it the packs sit
	// beside the raw bytes (the original files are kept).
	Release bool
	// Workers is the experts coded at once (default GOMAXPROCS).
	Workers int
	// Force packs every expert whatever it gains (tests).
	Force bool
	// OnExpert, when set, is called after each expert is coded, with its
	// raw and packed sizes (packed 0: left raw).
	OnExpert func(layer, expert int, raw, packed int64)
}

// ShardResult says what Converter.Shard did to one shard.
type ShardResult struct {
	Shard string
	Stage Stage // where the shard stands now
	// Pack is the shard's pack ("" when it holds no expert).
	Pack string
	// Experts counts the experts of its pack's layers whose first
	// weight extent is in the shard, Packed those in the pack.
	Experts, Packed int
	// RawBytes and PackedBytes are the packed experts' bytes before and
	// after (known when the pack was written or verified now).
	RawBytes, PackedBytes int64
	// Wrote says the pack was written now; Kept that a pack found in
	// place verified and was kept.
	Wrote, Kept bool
	// ReleasedBytes is the disk space given back now.
	ReleasedBytes int64
}

// Converter packs and releases the shards of one open model directory, one
// shard at a time, recording each stage in the directory's record. It is
// not safe for concurrent use.
type Converter struct {
	dir     string
	c       *container.Container
	cfg     *config.Config
	rec     *Record
	opts    Options
	sources map[string][]string // SourcesByShard, once located
}

// NewConverter converts the model in dir, open as c with config cfg, whose
// record is rec (every shard listed; Convert and engine/pull make it). The
// container may read some shards from placeholders (container.OpenFiles):
// a shard is converted only once it and every shard its experts read are
// present.
func NewConverter(dir string, c *container.Container, cfg *config.Config, rec *Record, opts Options) *Converter {
	return &Converter{dir: dir, c: c, cfg: cfg, rec: rec, opts: opts}
}

// Record is the directory's record as the converter keeps it.
func (cv *Converter) Record() *Record { return cv.rec }

// Sources lists the shards whose bytes shard's pack is made from (nil when
// the shard gets no pack): they must all be present to convert it. The
// model's experts are located once, on the first call.
func (cv *Converter) Sources(shard string) ([]string, error) {
	if cv.sources == nil {
		m, err := expertpack.SourcesByShard(cv.c, cv.cfg)
		if err != nil {
			return nil, err
		}
		cv.sources = m
	}
	return cv.sources[shard], nil
}

// Shard brings one shard as far as the options go: its pack written (or
// one found in place kept) and verified from the disk, then, with
// Release, its experts' raw bytes released. Each stage is recorded before
// the next starts; a shard already there is left as it is. A shard with no
// experts stays present.
func (cv *Converter) Shard(ctx context.Context, shard string) (ShardResult, error) {
	res := ShardResult{Shard: shard}
	f, ok := cv.rec.File(shard)
	if !ok || !f.Shard {
		return res, fmt.Errorf("packed: %s is not a shard of %s", shard, cv.dir)
	}
	sources, err := cv.Sources(shard)
	if err != nil {
		return res, err
	}
	res.Stage = f.Stage
	if len(sources) == 0 {
		return res, nil
	}
	for _, s := range sources {
		if sf, ok := cv.rec.File(s); !ok || sf.Stage == Absent {
			return res, fmt.Errorf("packed: %s cannot be packed before %s is present", shard, s)
		}
	}
	path := expertpack.PackPath(filepath.Join(cv.dir, shard))
	res.Pack = path
	if f.Stage == Present {
		if err := cv.pack(ctx, shard, path, &res); err != nil {
			return res, err
		}
		if err := cv.setStage(shard, Packed); err != nil {
			return res, err
		}
	}
	f, _ = cv.rec.File(shard)
	if !cv.opts.Release || f.Stage == Released {
		res.Stage = f.Stage
		return res, nil
	}
	x, err := expertpack.ReadIndex(path)
	if err != nil {
		return res, fmt.Errorf("packed: %s's pack, verified before, does not read now: %w", shard, err)
	}
	if err := cv.setStage(shard, Releasing); err != nil {
		return res, err
	}
	n, err := Release(cv.c, cv.cfg, x)
	res.ReleasedBytes = n
	if errors.Is(err, ErrCannotRelease) && n == 0 {
		// Nothing was released: the raw bytes stay beside the pack.
		if serr := cv.setStage(shard, Packed); serr != nil {
			return res, serr
		}
		res.Stage = Packed
		return res, err
	}
	if err != nil {
		return res, err
	}
	if err := cv.setStage(shard, Released); err != nil {
		return res, err
	}
	res.Stage = Released
	return res, nil
}

// pack writes shard's pack, or keeps a current one found in place, and
// verifies it from the disk against the raw bytes.
func (cv *Converter) pack(ctx context.Context, shard, path string, res *ShardResult) error {
	if x, err := expertpack.ReadIndex(path); err == nil && x.Check(cv.dir) == nil {
		if n, err := expertpack.VerifyPack(ctx, cv.c, cv.cfg, path, x, true); err == nil {
			res.Kept, res.Packed = true, n
			return nil
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		// A pack that does not verify is written again.
	}
	r, err := expertpack.PackShard(ctx, cv.c, cv.cfg, expertpack.ExpertLayers(cv.c, cv.cfg), shard,
		expertpack.Options{Workers: cv.opts.Workers, Force: cv.opts.Force, OnExpert: cv.opts.OnExpert, VerifyFromDisk: true})
	if err != nil {
		return fmt.Errorf("packed: packing %s: %w", shard, err)
	}
	res.Wrote, res.Experts, res.Packed, res.RawBytes, res.PackedBytes = true, r.Experts, r.Packed, r.RawBytes, r.PackedBytes
	x, err := expertpack.ReadIndex(path)
	if err != nil {
		return fmt.Errorf("packed: the pack just written does not read back: %w", err)
	}
	if _, err := expertpack.VerifyPack(ctx, cv.c, cv.cfg, path, x, true); err != nil {
		return fmt.Errorf("packed: the pack just written does not verify from the disk: %w", err)
	}
	return nil
}

func (cv *Converter) setStage(shard string, s Stage) error {
	f, _ := cv.rec.File(shard)
	f.Stage = s
	return cv.rec.Write(cv.dir)
}

// Release gives back to the file system the raw bytes the packed experts
// of x take in the shards (whole blocks; the bytes of a block shared with
// anything else stay), syncs each shard and restores its modification
// time to the one x's sources recorded, so that the pack stays current. It
// returns the bytes released. Releasing again is harmless.
func Release(c *container.Container, cfg *config.Config, x *expertpack.Index) (int64, error) {
	extents, err := expertpack.Extents(c, cfg, x)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, name := range slices.Sorted(maps.Keys(extents)) {
		n, err := punchFile(filepath.Join(c.Dir(), name), extents[name])
		total += n
		if err != nil {
			return total, err
		}
	}
	for _, s := range x.Sources {
		if err := os.Chtimes(filepath.Join(c.Dir(), s.Name), time.Time{}, time.Unix(0, s.ModTime)); err != nil {
			return total, fmt.Errorf("packed: restoring the modification time of %s: %w", s.Name, err)
		}
	}
	return total, nil
}

func punchFile(path string, es []container.Extent) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("packed: %w", err)
	}
	defer f.Close()
	var total int64
	for _, e := range es {
		n, err := diskio.PunchHole(f, e.Offset, e.Length)
		total += n
		if errors.Is(err, diskio.ErrPunchUnsupported) {
			return total, fmt.Errorf("packed: %w: %v (keep the original files, or move the model to an APFS, ext4, XFS or Btrfs volume)", ErrCannotRelease, err)
		}
		if err != nil {
			return total, fmt.Errorf("packed: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return total, fmt.Errorf("packed: syncing %s: %w", path, err)
	}
	return total, nil
}

// ErrCannotRelease is wrapped when the volume cannot release part of a
// file: the packs work, but the raw bytes keep their space.
var ErrCannotRelease = errors.New("this volume cannot release the raw experts' space")

func diskioAllocated(path string) (int64, error) { return diskio.AllocatedBytes(path) }
