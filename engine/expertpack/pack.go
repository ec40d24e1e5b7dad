package expertpack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/native"
)

// minGain is the largest record, as a fraction of the expert's raw bytes,
// worth packing: an expert that codes larger stays in its shard alone.
const minGain = 0.97

// Expert is one routed expert's raw bytes, as a pack record holds them.
type Expert struct {
	// Region is the weight extents concatenated, Segments the lengths of
	// the matrices' weights in region order, Scales the scale extents
	// concatenated.
	Region   []byte
	Segments []int64
	Scales   []byte
}

// ReadExpert reads the raw bytes of a located expert.
func ReadExpert(c *container.Container, loc container.ExpertLocation) (*Expert, error) {
	x := &Expert{}
	type span struct{ start, n int64 }
	var mats []span
	var base int64
	for _, e := range loc.Weights {
		buf := make([]byte, e.Length)
		if err := c.ReadExtent(e, buf); err != nil {
			return nil, fmt.Errorf("expertpack: %w", err)
		}
		x.Region = append(x.Region, buf...)
		for _, m := range []container.MatrixInfo{loc.Gate, loc.Up, loc.Down} {
			w := m.Weight
			if w.File == e.File && w.Offset >= e.Offset && w.Offset+w.Size <= e.Offset+e.Length {
				mats = append(mats, span{base + w.Offset - e.Offset, w.Size})
			}
		}
		base += e.Length
	}
	sort.Slice(mats, func(i, j int) bool { return mats[i].start < mats[j].start })
	var at int64
	for _, m := range mats {
		if m.start > at {
			x.Segments = append(x.Segments, m.start-at)
		}
		x.Segments = append(x.Segments, m.n)
		at = m.start + m.n
	}
	if at < int64(len(x.Region)) {
		x.Segments = append(x.Segments, int64(len(x.Region))-at)
	}
	for _, e := range loc.Scales {
		buf := make([]byte, e.Length)
		if err := c.ReadExtent(e, buf); err != nil {
			return nil, fmt.Errorf("expertpack: %w", err)
		}
		x.Scales = append(x.Scales, buf...)
	}
	return x, nil
}

// RawSlabNeed is the slab length the streamed tier gives an expert read
// raw: each weight and scale extent in a region of native.SlabLen bytes.
// A record is packed only if its in-place decode fits in that.
func RawSlabNeed(loc container.ExpertLocation) int64 {
	var n int64
	for _, e := range append(slices.Clone(loc.Weights), loc.Scales...) {
		n += native.SlabLen(e.Length)
	}
	return n
}

// PackedSlabNeed is the slab length a packed expert needs: its record read
// at SlabAt, in whole direct-read blocks.
func (e Entry) PackedSlabNeed() int64 { return e.SlabAt + roundUp(e.Length, RecordAlign) }

// Options tune PackShard.
type Options struct {
	// Workers is the experts coded at once (default GOMAXPROCS).
	Workers int
	// Force packs every expert and codes every matrix, whatever it
	// gains, even when the in-place decode needs a larger slab than the
	// raw read (tests use it to put every expert of a small model through
	// the coder).
	Force bool
	// OnExpert, when set, is called after each expert is coded and
	// verified, with its raw and packed sizes (packed 0: left raw).
	OnExpert func(layer, expert int, raw, packed int64)
}

// ShardResult says what PackShard did.
type ShardResult struct {
	Shard string
	// Path is the pack written; empty when the shard has no routed
	// experts. A pack without entries says no expert was worth packing.
	Path string
	// Experts counts the experts whose first weight extent is in the
	// shard, Packed those in the pack.
	Experts, Packed int
	// RawBytes and PackedBytes are the packed experts' bytes before and
	// after.
	RawBytes, PackedBytes int64
}

// PackShard writes the pack of one shard of the container: every routed
// expert of layers whose first weight extent lies in shard, coded and
// verified (decoded back and compared byte for byte) before it is
// written. The file appears under its name only once complete and synced;
// an existing pack is replaced.
func PackShard(ctx context.Context, c *container.Container, cfg *config.Config, layers []int, shard string, opts Options) (ShardResult, error) {
	res := ShardResult{Shard: shard}
	var locs []container.ExpertLocation
	for _, l := range layers {
		for e := 0; e < cfg.NumRoutedExperts; e++ {
			loc, err := c.Expert(l, e, cfg)
			if err != nil {
				return res, fmt.Errorf("expertpack: %w", err)
			}
			if len(loc.Weights) > 0 && loc.Weights[0].File == shard {
				locs = append(locs, loc)
			}
		}
	}
	res.Experts = len(locs)
	if len(locs) == 0 {
		return res, nil
	}
	recs, err := codeExperts(ctx, c, locs, opts)
	if err != nil {
		return res, err
	}
	sources := map[string]bool{shard: true}
	var entries []Entry
	var kept [][]byte
	for i, r := range recs {
		if r == nil {
			continue
		}
		entries = append(entries, r.entry)
		kept = append(kept, r.rec)
		for _, e := range append(slices.Clone(locs[i].Weights), locs[i].Scales...) {
			sources[e.File] = true
		}
		res.Packed++
		res.RawBytes += locs[i].Bytes()
		res.PackedBytes += int64(len(r.rec))
	}
	x := &Index{Entries: entries}
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		s, err := Identify(filepath.Join(c.Dir(), name))
		if err != nil {
			return res, err
		}
		x.Sources = append(x.Sources, s)
	}
	off := roundUp(indexLen(x.Sources, len(entries)), RecordAlign)
	for i := range x.Entries {
		x.Entries[i].Offset = off
		off = roundUp(off+x.Entries[i].Length, RecordAlign)
	}
	path := PackPath(filepath.Join(c.Dir(), shard))
	if err := writePack(path, x, kept); err != nil {
		return res, err
	}
	res.Path = path
	return res, nil
}

type coded struct {
	entry Entry
	rec   []byte
}

// codeExperts builds, verifies and sizes the record of every expert, on
// opts.Workers goroutines; an expert not worth packing gets nil.
func codeExperts(ctx context.Context, c *container.Container, locs []container.ExpertLocation, opts Options) ([]*coded, error) {
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	out := make([]*coded, len(locs))
	errs := make([]error, len(locs))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex // serializes OnExpert
	for range min(workers, len(locs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i], errs[i] = codeExpert(c, locs[i], opts.Force)
				if opts.OnExpert != nil && errs[i] == nil {
					var packed int64
					if out[i] != nil {
						packed = int64(len(out[i].rec))
					}
					mu.Lock()
					opts.OnExpert(locs[i].Layer, locs[i].Expert, locs[i].Bytes(), packed)
					mu.Unlock()
				}
			}
		}()
	}
	var cerr error
	for i := range locs {
		if cerr = ctx.Err(); cerr != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if cerr != nil {
		return nil, cerr
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("expertpack: layer %d expert %d: %w", locs[i].Layer, locs[i].Expert, err)
		}
	}
	return out, nil
}

func codeExpert(c *container.Container, loc container.ExpertLocation, force bool) (*coded, error) {
	x, err := ReadExpert(c, loc)
	if err != nil {
		return nil, err
	}
	rec, err := BuildRecord(x.Region, x.Segments, x.Scales, force)
	if err != nil {
		return nil, err
	}
	r, err := ParseRecord(rec, int64(len(rec)))
	if err != nil {
		return nil, fmt.Errorf("a record just built does not parse: %w", err)
	}
	e := Entry{Layer: loc.Layer, Expert: loc.Expert, Length: int64(len(rec)), SlabAt: r.SlabAt(RecordAlign)}
	if !force && (float64(len(rec)) > minGain*float64(loc.Bytes()) || e.PackedSlabNeed() > RawSlabNeed(loc)) {
		return nil, nil
	}
	region := make([]byte, len(x.Region))
	scales := make([]byte, len(x.Scales))
	if err := Decode(region, scales, rec); err != nil {
		return nil, fmt.Errorf("verifying the record: %w", err)
	}
	if !bytes.Equal(region, x.Region) || !bytes.Equal(scales, x.Scales) {
		return nil, errors.New("verifying the record: decoded bytes differ from the shard's")
	}
	e.CRC = crc32.Update(crc32.Checksum(x.Region, castagnoli), castagnoli, x.Scales)
	return &coded{entry: e, rec: rec}, nil
}

// writePack writes header, index and records to path.partial, syncs it
// and renames it over path.
func writePack(path string, x *Index, recs [][]byte) (err error) {
	tmp := path + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("expertpack: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	head := x.encode()
	if _, err := f.WriteAt(head, 0); err != nil {
		return fmt.Errorf("expertpack: writing %s: %w", tmp, err)
	}
	end := int64(len(head))
	for i, e := range x.Entries {
		if _, err := f.WriteAt(recs[i], e.Offset); err != nil {
			return fmt.Errorf("expertpack: writing %s: %w", tmp, err)
		}
		end = e.Offset + e.Length
	}
	// Records are read in whole direct-read blocks: pad the last one.
	if err := f.Truncate(roundUp(end, RecordAlign)); err != nil {
		return fmt.Errorf("expertpack: writing %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("expertpack: syncing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("expertpack: closing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("expertpack: %w", err)
	}
	return nil
}

// ExpertLayers lists the layers whose routed experts a model streams: its
// sparse layers, then the MTP layer when the container has its experts.
func ExpertLayers(c *container.Container, cfg *config.Config) []int {
	layers := cfg.SparseLayers()
	if cfg.NumNextNPredictLayers > 0 {
		if _, err := c.Expert(cfg.NumLayers, 0, cfg); err == nil {
			layers = append(layers, cfg.NumLayers)
		}
	}
	return layers
}

// ModelResult is one shard's outcome in PackModel.
type ModelResult struct {
	ShardResult
	// Current is true when the shard already had an up-to-date pack,
	// which was kept.
	Current bool
}

// PackModel packs every shard of the container that has routed experts
// and no up-to-date pack (resuming an interrupted run shard by shard),
// calling onShard after each.
func PackModel(ctx context.Context, c *container.Container, cfg *config.Config, opts Options, onShard func(ModelResult)) ([]ModelResult, error) {
	layers := ExpertLayers(c, cfg)
	var out []ModelResult
	for _, sh := range c.Shards() {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		path := PackPath(filepath.Join(c.Dir(), sh.Name))
		if x, err := ReadIndex(path); err == nil && x.Check(c.Dir()) == nil {
			r := ModelResult{ShardResult: ShardResult{Shard: sh.Name, Path: path, Packed: len(x.Entries)}, Current: true}
			out = append(out, r)
			if onShard != nil {
				onShard(r)
			}
			continue
		}
		res, err := PackShard(ctx, c, cfg, layers, sh.Name, opts)
		if err != nil {
			return out, fmt.Errorf("expertpack: packing %s: %w", sh.Name, err)
		}
		if res.Path == "" {
			// No experts here: a stale pack must not linger.
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return out, fmt.Errorf("expertpack: %w", err)
			}
		}
		r := ModelResult{ShardResult: res}
		out = append(out, r)
		if onShard != nil {
			onShard(r)
		}
	}
	return out, nil
}
