package pull

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/packed"
	"github.com/spoolhq/spool/native/diskio"
)

// ErrOffline is wrapped by a repair's error when the hub could not be
// reached: the expert stays damaged, and a repair when online fixes it.
var ErrOffline = errors.New("the hub cannot be reached")

// ErrNoOrigin is wrapped when a model's files did not come from the hub
// (no record of their origin): nothing can fetch them again.
var ErrNoOrigin = errors.New("the model's origin is not known")

// Repairer restores the damaged experts of a model from the hub it came
// from: a pack record that fails its checks is read again, and, still
// damaged, rebuilt from the expert's raw bytes (the shard's, where they
// remain and match the record's checksum, else fetched again with Range
// requests) and written over the damaged record in place; a damaged raw
// expert's bytes are fetched and written back into its shard. Repairs run
// one at a time. It is safe for concurrent use.
type Repairer struct {
	dir     string
	c       *container.Container
	cfg     *config.Config
	rec     *packed.Record
	client  *hub.Client
	offline bool // HF_HUB_OFFLINE: no request leaves

	mu sync.Mutex
}

// NewRepairer repairs the model in dir (open as c with config cfg, whose
// record is rec) from the hub client talks to.
func NewRepairer(dir string, c *container.Container, cfg *config.Config, rec *packed.Record, client *hub.Client) *Repairer {
	return &Repairer{dir: dir, c: c, cfg: cfg, rec: rec, client: client}
}

// RepairExpert restores layer's expert, whose read from file (a shard or a
// pack, named in the model's directory) found it damaged. It returns nil
// when the bytes on disk are right again (or were: a read that failed
// once), an error wrapping ErrOffline when the hub could not be reached,
// ErrNoOrigin when the model did not come from one.
func (r *Repairer) RepairExpert(ctx context.Context, layer, expert int, file string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	loc, err := r.c.Expert(layer, expert, r.cfg)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	if shard, ok := strings.CutSuffix(file, expertpack.Suffix); ok {
		return r.repairRecord(ctx, loc, shard)
	}
	return r.repairRaw(ctx, loc)
}

// repairRecord restores the record of loc in shard's pack.
func (r *Repairer) repairRecord(ctx context.Context, loc container.ExpertLocation, shard string) error {
	path := expertpack.PackPath(filepath.Join(r.dir, shard))
	x, err := expertpack.ReadIndex(path)
	if err != nil {
		return fmt.Errorf("pull: %s's index is damaged (%w): its experts cannot be told apart; fetch the model again", path, err)
	}
	e, ok := x.Lookup(loc.Layer, loc.Expert)
	if !ok {
		return fmt.Errorf("pull: layer %d expert %d is not in %s", loc.Layer, loc.Expert, path)
	}
	// Read again: the first read may have been a passing fault.
	if err := checkRecord(path, e, loc); err == nil {
		return nil
	}
	raw, err := r.rawExpert(ctx, loc, !r.rec.Released(shard), e.CRC)
	if err != nil {
		return fmt.Errorf("pull: restoring layer %d expert %d of %s: %w", loc.Layer, loc.Expert, path, err)
	}
	recBytes, err := expertpack.RebuildRecord(raw, e)
	if err != nil {
		return fmt.Errorf("pull: restoring layer %d expert %d of %s: %w", loc.Layer, loc.Expert, path, err)
	}
	if err := writeAt(path, recBytes, e.Offset); err != nil {
		return err
	}
	if err := checkRecord(path, e, loc); err != nil {
		return fmt.Errorf("pull: layer %d expert %d of %s is still damaged after it was written again (the disk may be failing): %w", loc.Layer, loc.Expert, path, err)
	}
	return nil
}

// checkRecord reads e's record from the disk and decodes it.
func checkRecord(path string, e expertpack.Entry, loc container.ExpertLocation) error {
	f, err := diskio.OpenDirect(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, err = expertpack.DecodeEntry(f, diskio.AlignedBuffer(int(max(e.PackedSlabNeed(), loc.WeightBytes))), e)
	return err
}

// repairRaw fetches a raw expert's bytes from the hub and writes them back
// into its shards.
func (r *Repairer) repairRaw(ctx context.Context, loc container.ExpertLocation) error {
	for _, ext := range append(append([]container.Extent(nil), loc.Weights...), loc.Scales...) {
		if r.rec.Released(ext.File) {
			return fmt.Errorf("pull: layer %d expert %d is read from its pack, not %s", loc.Layer, loc.Expert, ext.File)
		}
	}
	raw, err := r.fetchExpert(ctx, loc)
	if err != nil {
		return fmt.Errorf("pull: restoring layer %d expert %d: %w", loc.Layer, loc.Expert, err)
	}
	return r.writeRaw(loc, raw)
}

// rawExpert is loc's raw bytes with the checksum want: the shard's when
// local and they match, else the hub's.
func (r *Repairer) rawExpert(ctx context.Context, loc container.ExpertLocation, local bool, want uint32) (*expertpack.Expert, error) {
	if local {
		if x, err := expertpack.ReadExpert(r.c, loc); err == nil && crcOf(x) == want {
			return x, nil
		}
	}
	x, err := r.fetchExpert(ctx, loc)
	if err != nil {
		return nil, err
	}
	if got := crcOf(x); got != want {
		return nil, fmt.Errorf("%w: the hub's bytes have CRC-32C %08x, the pack recorded %08x", expertpack.ErrCorrupt, got, want)
	}
	return x, nil
}

// fetchExpert fetches loc's extents from the hub with Range requests.
func (r *Repairer) fetchExpert(ctx context.Context, loc container.ExpertLocation) (*expertpack.Expert, error) {
	o := r.rec.Origin
	if o == nil || o.Repo == "" || o.Commit == "" {
		return nil, fmt.Errorf("%w: %s was not downloaded by Spool; restore its shards from where they came from", ErrNoOrigin, r.dir)
	}
	if r.offline {
		return nil, fmt.Errorf("%w (HF_HUB_OFFLINE is set): Spool repairs it once online (spool pull --repair)", ErrOffline)
	}
	x := &expertpack.Expert{Segments: expertpack.SegmentsOf(loc)}
	for i, es := range [][]container.Extent{loc.Weights, loc.Scales} {
		for _, ext := range es {
			f, ok := r.rec.File(ext.File)
			if !ok {
				return nil, fmt.Errorf("%w: %s is not in the model's record", ErrNoOrigin, ext.File)
			}
			hf := hub.File{Path: f.Name, Size: f.Size, SHA256: f.SHA256}
			if f.SHA256 == "" {
				hf.BlobID = f.Etag
			}
			b, err := fetchRange(ctx, r.client, o.Repo, o.Commit, hf, ext.Offset, ext.Offset+ext.Length)
			if err != nil {
				if offline(err) {
					return nil, fmt.Errorf("%w (%v): Spool repairs it once online (spool pull --repair)", ErrOffline, err)
				}
				return nil, fmt.Errorf("fetching bytes %d-%d of %s from %s: %w", ext.Offset, ext.Offset+ext.Length, ext.File, o.Repo, err)
			}
			if i == 0 {
				x.Region = append(x.Region, b...)
			} else {
				x.Scales = append(x.Scales, b...)
			}
		}
	}
	return x, nil
}

// writeRaw writes an expert's raw bytes back into its extents, syncs the
// shards and keeps their modification times (the packs' and the
// checksums' source checks).
func (r *Repairer) writeRaw(loc container.ExpertLocation, x *expertpack.Expert) error {
	for i, es := range [][]container.Extent{loc.Weights, loc.Scales} {
		src := x.Region
		if i == 1 {
			src = x.Scales
		}
		var at int64
		for _, ext := range es {
			path := filepath.Join(r.dir, ext.File)
			fi, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("pull: %w", err)
			}
			if err := writeAt(path, src[at:at+ext.Length], ext.Offset); err != nil {
				return err
			}
			if err := os.Chtimes(path, time.Time{}, fi.ModTime()); err != nil {
				return fmt.Errorf("pull: %w", err)
			}
			at += ext.Length
		}
	}
	return nil
}

func writeAt(path string, b []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		return fmt.Errorf("pull: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("pull: syncing %s: %w", path, err)
	}
	return nil
}

func crcOf(x *expertpack.Expert) uint32 { return expertpack.Checksum(x.Region, x.Scales) }

// offline reports whether err is a failure to reach the hub at all.
func offline(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) && (errors.As(err, &ne) || strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "no such host"))
}

// RepairResult is one expert RepairModel found damaged.
type RepairResult struct {
	Layer, Expert int
	File          string // the pack or shard it was read from
	Err           error  // nil: repaired
}

// RepairModel reads every pack record of the model in dir and repairs each
// that fails its checks from the hub client talks to (see Repairer),
// reporting each damaged one to onExpert. It returns the damaged experts,
// and an error for a failure to check at all.
func RepairModel(ctx context.Context, dir string, client *hub.Client, onExpert func(RepairResult)) ([]RepairResult, error) {
	unlock, err := packed.Use(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := packed.ReadRecord(dir)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Origin == nil {
		return nil, fmt.Errorf("pull: %w: %s has no record of where it came from", ErrNoOrigin, dir)
	}
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, err
	}
	c, err := container.Open(dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r := NewRepairer(dir, c, cfg, rec, client)
	var out []RepairResult
	for _, sh := range c.Shards() {
		path := expertpack.PackPath(filepath.Join(dir, sh.Name))
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && !rec.Released(sh.Name) {
			continue
		}
		x, err := expertpack.ReadIndex(path)
		if err != nil {
			return out, fmt.Errorf("pull: %w; fetch the model again", err)
		}
		for _, e := range x.Entries {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			loc, err := c.Expert(e.Layer, e.Expert, cfg)
			if err != nil {
				return out, fmt.Errorf("pull: %w", err)
			}
			if checkRecord(path, e, loc) == nil {
				continue
			}
			res := RepairResult{Layer: e.Layer, Expert: e.Expert, File: sh.Name + expertpack.Suffix}
			res.Err = r.RepairExpert(ctx, e.Layer, e.Expert, res.File)
			out = append(out, res)
			if onExpert != nil {
				onExpert(res)
			}
		}
	}
	return out, nil
}

// Repair is experts.Repairer: the streamed tier hands it an expert a read
// found damaged (a pack record, or a raw expert's bytes).
func (r *Repairer) Repair(ctx context.Context, damage *experts.ReadError) error {
	return r.RepairExpert(ctx, damage.Layer, damage.Expert, damage.File)
}

// RepairerFor is the Repairer of the model in dir (open as c with config
// cfg) when it came from the hub (its record says from where), nil
// otherwise: what the engine gives its streamed tier. The hub is reached
// as env says; offline, repairs say so and wait for a later read.
func RepairerFor(c *container.Container, cfg *config.Config, env hub.Env) (*Repairer, error) {
	rec, err := packed.ReadRecord(c.Dir())
	if err != nil || rec == nil || rec.Origin == nil {
		return nil, err
	}
	r := NewRepairer(c.Dir(), c, cfg, rec, hub.NewClient(env))
	r.offline = env.Offline // no request leaves
	return r, nil
}
