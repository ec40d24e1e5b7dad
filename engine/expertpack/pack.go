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
	"github.com/spoolhq/spool/internal/atomicfile"
	"github.com/spoolhq/spool/native/diskio"
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
	x := &Expert{Segments: SegmentsOf(loc), Region: make([]byte, loc.WeightBytes), Scales: make([]byte, loc.ScaleBytes)}
	for _, part := range []struct {
		es  []container.Extent
		dst []byte
	}{{loc.Weights, x.Region}, {loc.Scales, x.Scales}} {
		var at int64
		for _, e := range part.es {
			if at+e.Length > int64(len(part.dst)) {
				return nil, fmt.Errorf("expertpack: layer %d expert %d: extents longer than the expert", loc.Layer, loc.Expert)
			}
			if err := c.ReadExtent(e, part.dst[at:at+e.Length]); err != nil {
				return nil, fmt.Errorf("expertpack: %w", err)
			}
			at += e.Length
		}
	}
	return x, nil
}

// SegmentsOf cuts the region of the expert at loc (its weight extents
// concatenated) into the pieces a record codes with tables of their own:
// each matrix's weights, and whatever lies between them.
func SegmentsOf(loc container.ExpertLocation) []int64 {
	type span struct{ start, n int64 }
	var mats []span
	var base int64
	for _, e := range loc.Weights {
		for _, m := range []container.MatrixInfo{loc.Gate, loc.Up, loc.Down} {
			w := m.Weight
			if w.File == e.File && w.Offset >= e.Offset && w.Offset+w.Size <= e.Offset+e.Length {
				mats = append(mats, span{base + w.Offset - e.Offset, w.Size})
			}
		}
		base += e.Length
	}
	sort.Slice(mats, func(i, j int) bool { return mats[i].start < mats[j].start })
	var segs []int64
	var at int64
	for _, m := range mats {
		if m.start > at {
			segs = append(segs, m.start-at)
		}
		segs = append(segs, m.n)
		at = m.start + m.n
	}
	if at < base {
		segs = append(segs, base-at)
	}
	return segs
}

// RebuildRecord codes an expert's raw bytes again into the record entry e
// stands for: packing is deterministic, so the same bytes give the same
// record, which can be written over a damaged one in place. It fails
// (wrapping ErrCorrupt) when the bytes do not have e's checksum, or code
// to a record that does not fit e's place.
func RebuildRecord(x *Expert, e Entry) ([]byte, error) {
	if crc := crc32.Update(crc32.Checksum(x.Region, castagnoli), castagnoli, x.Scales); crc != e.CRC {
		return nil, corrupt("the expert's raw bytes have CRC-32C %08x, its pack entry %08x", crc, e.CRC)
	}
	for _, force := range []bool{false, true} {
		rec, err := BuildRecord(x.Region, x.Segments, x.Scales, force)
		if err != nil {
			return nil, err
		}
		if int64(len(rec)) != e.Length {
			continue
		}
		r, err := ParseRecord(rec, e.Length)
		if err != nil || r.SlabAt(RecordAlign) > e.SlabAt {
			continue
		}
		region, scales := make([]byte, len(x.Region)), make([]byte, len(x.Scales))
		if err := Decode(region, scales, rec); err != nil || !bytes.Equal(region, x.Region) || !bytes.Equal(scales, x.Scales) {
			return nil, fmt.Errorf("expertpack: a rebuilt record does not decode back: %v", err)
		}
		return rec, nil
	}
	return nil, corrupt("the expert's bytes code to a record of another length than its entry's %d", e.Length)
}

// RawSlabNeed is the slab length the streamed tier gives an expert read
// raw: each weight and scale extent in a region of diskio.SlabLen bytes.
// A record is packed only if its in-place decode fits in that.
func RawSlabNeed(loc container.ExpertLocation) int64 {
	var n int64
	for _, e := range append(slices.Clone(loc.Weights), loc.Scales...) {
		n += diskio.SlabLen(e.Length)
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
	// Dir is where PackShard writes the pack (default: beside the
	// shard; benchmarks write elsewhere).
	Dir string
	// VerifyFromDisk leaves the check of each record to the caller, who
	// decodes every record back from the disk once the pack is written
	// (VerifyPack): the in-memory decode would be a second one.
	VerifyFromDisk bool
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
	locs, err := shardExperts(c, cfg, layers, shard)
	if err != nil {
		return res, err
	}
	res.Experts = len(locs)
	if len(locs) == 0 {
		return res, nil
	}
	// Sources: every shard an expert of this shard reads (known up
	// front, so the index's room is reserved before records are written).
	x := &Index{}
	for _, name := range sourcesOf(shard, locs) {
		s, err := Identify(filepath.Join(c.Dir(), name))
		if err != nil {
			return res, err
		}
		x.Sources = append(x.Sources, s)
	}
	dir := c.Dir()
	if opts.Dir != "" {
		dir = opts.Dir
	}
	path := PackPath(filepath.Join(dir, shard))
	w, err := newPackWriter(path, roundUp(indexLen(x.Sources, len(locs)), RecordAlign))
	if err != nil {
		return res, err
	}
	defer w.abort()
	// Records are written in expert order as they are coded: memory holds
	// only the few in flight.
	err = codeExperts(ctx, c, locs, opts, func(i int, r *coded) error {
		if r == nil {
			return nil
		}
		e, err := w.record(r.entry, r.rec)
		if err != nil {
			return err
		}
		x.Entries = append(x.Entries, e)
		res.Packed++
		res.RawBytes += locs[i].Bytes()
		res.PackedBytes += int64(len(r.rec))
		return nil
	})
	if err != nil {
		return res, err
	}
	if err := w.finish(x); err != nil {
		return res, err
	}
	res.Path = path
	return res, nil
}

// shardExperts locates the experts of layers whose first weight extent is
// in shard: the experts its pack holds.
func shardExperts(c *container.Container, cfg *config.Config, layers []int, shard string) ([]container.ExpertLocation, error) {
	var locs []container.ExpertLocation
	for _, l := range layers {
		for e := 0; e < cfg.NumRoutedExperts; e++ {
			loc, err := c.Expert(l, e, cfg)
			if err != nil {
				return nil, fmt.Errorf("expertpack: %w", err)
			}
			if len(loc.Weights) > 0 && loc.Weights[0].File == shard {
				locs = append(locs, loc)
			}
		}
	}
	return locs, nil
}

// sourcesOf lists, sorted, shard and every shard the experts at locs read.
func sourcesOf(shard string, locs []container.ExpertLocation) []string {
	sources := map[string]bool{shard: true}
	for _, loc := range locs {
		for _, e := range append(slices.Clone(loc.Weights), loc.Scales...) {
			sources[e.File] = true
		}
	}
	return slices.Sorted(maps.Keys(sources))
}

// ShardSources lists the shards whose bytes the pack of shard would be
// made from: shard itself and every shard its experts' extents lie in
// (the pack's Sources, known before packing). It is nil when the shard
// holds no expert's first weight extent (it gets no pack).
func ShardSources(c *container.Container, cfg *config.Config, shard string) ([]string, error) {
	locs, err := shardExperts(c, cfg, ExpertLayers(c, cfg), shard)
	if err != nil || len(locs) == 0 {
		return nil, err
	}
	return sourcesOf(shard, locs), nil
}

// SourcesByShard is ShardSources of every shard at once, in one pass over
// the experts: shard -> the shards its pack would be made from (absent:
// no pack).
func SourcesByShard(c *container.Container, cfg *config.Config) (map[string][]string, error) {
	byShard := map[string][]container.ExpertLocation{}
	for _, l := range ExpertLayers(c, cfg) {
		for e := 0; e < cfg.NumRoutedExperts; e++ {
			loc, err := c.Expert(l, e, cfg)
			if err != nil {
				return nil, fmt.Errorf("expertpack: %w", err)
			}
			if len(loc.Weights) > 0 {
				byShard[loc.Weights[0].File] = append(byShard[loc.Weights[0].File], loc)
			}
		}
	}
	out := make(map[string][]string, len(byShard))
	for shard, locs := range byShard {
		out[shard] = sourcesOf(shard, locs)
	}
	return out, nil
}

// Extents lists, per shard, the byte ranges the packed experts of x take
// in the shards (weights and scales; sorted, touching ranges merged): the
// raw bytes a current pack stands in for.
func Extents(c *container.Container, cfg *config.Config, x *Index) (map[string][]container.Extent, error) {
	byFile := map[string][]container.Extent{}
	for _, e := range x.Entries {
		loc, err := c.Expert(e.Layer, e.Expert, cfg)
		if err != nil {
			return nil, fmt.Errorf("expertpack: %w", err)
		}
		for _, ext := range append(slices.Clone(loc.Weights), loc.Scales...) {
			byFile[ext.File] = append(byFile[ext.File], ext)
		}
	}
	for f, es := range byFile {
		sort.Slice(es, func(i, j int) bool { return es[i].Offset < es[j].Offset })
		merged := es[:1]
		for _, e := range es[1:] {
			last := &merged[len(merged)-1]
			if e.Offset < last.Offset+last.Length {
				return nil, fmt.Errorf("expertpack: extents of two experts overlap in %s at %d", f, e.Offset)
			}
			if e.Offset == last.Offset+last.Length {
				last.Length += e.Length
				continue
			}
			merged = append(merged, e)
		}
		byFile[f] = merged
	}
	return byFile, nil
}

type coded struct {
	entry Entry
	rec   []byte
}

// codeExperts builds, verifies and sizes the record of every expert, on
// opts.Workers goroutines, and hands each to emit in expert order (nil:
// not worth packing), with at most twice the workers' records in memory.
func codeExperts(ctx context.Context, c *container.Container, locs []container.ExpertLocation, opts Options, emit func(i int, r *coded) error) error {
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(locs))
	type result struct {
		i   int
		r   *coded
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	results := make(chan result, workers)
	room := make(chan struct{}, 2*workers) // records coded but not yet emitted
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := codeExpert(c, locs[i], opts.Force, !opts.VerifyFromDisk)
				results <- result{i, r, err}
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range locs {
			select {
			case room <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()
	pending := map[int]result{}
	want := 0
	var first error
	for res := range results {
		if first != nil {
			continue // drain
		}
		pending[res.i] = res
		for {
			r, ok := pending[want]
			if !ok {
				break
			}
			delete(pending, want)
			<-room
			switch {
			case r.err != nil:
				first = fmt.Errorf("expertpack: layer %d expert %d: %w", locs[r.i].Layer, locs[r.i].Expert, r.err)
			default:
				if opts.OnExpert != nil {
					var packed int64
					if r.r != nil {
						packed = int64(len(r.r.rec))
					}
					opts.OnExpert(locs[r.i].Layer, locs[r.i].Expert, locs[r.i].Bytes(), packed)
				}
				first = emit(r.i, r.r)
			}
			if first != nil {
				cancel()
				break
			}
			want++
		}
	}
	if first == nil && want < len(locs) {
		first = ctx.Err()
	}
	return first
}

func codeExpert(c *container.Container, loc container.ExpertLocation, force, verify bool) (*coded, error) {
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
	if verify {
		region := make([]byte, len(x.Region))
		scales := make([]byte, len(x.Scales))
		if err := Decode(region, scales, rec); err != nil {
			return nil, fmt.Errorf("verifying the record: %w", err)
		}
		if !bytes.Equal(region, x.Region) || !bytes.Equal(scales, x.Scales) {
			return nil, errors.New("verifying the record: decoded bytes differ from the shard's")
		}
	}
	e.CRC = Checksum(x.Region, x.Scales)
	return &coded{entry: e, rec: rec}, nil
}

// packWriter writes a pack through an atomicfile replacement of path:
// records first, after room reserved for the header and index, which
// finish writes last before the file is synced and renamed over path.
type packWriter struct {
	f         *atomicfile.File
	room, off int64
}

func newPackWriter(path string, room int64) (*packWriter, error) {
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("expertpack: %w", err)
	}
	return &packWriter{f: f, room: room, off: room}, nil
}

// record writes one record at the next aligned offset and returns its
// entry.
func (w *packWriter) record(e Entry, rec []byte) (Entry, error) {
	e.Offset = w.off
	if _, err := w.f.WriteAt(rec, e.Offset); err != nil {
		return e, fmt.Errorf("expertpack: writing %s: %w", w.f.Path(), err)
	}
	w.off = roundUp(e.Offset+int64(len(rec)), RecordAlign)
	return e, nil
}

// finish writes the header and index, pads the file to whole direct-read
// blocks (records are read in them) and commits it: synced, renamed into
// place, directory synced.
func (w *packWriter) finish(x *Index) error {
	head := x.encode()
	if int64(len(head)) > w.room {
		return fmt.Errorf("expertpack: internal error: index of %d bytes in %d reserved", len(head), w.room)
	}
	if _, err := w.f.WriteAt(head, 0); err != nil {
		return fmt.Errorf("expertpack: writing %s: %w", w.f.Path(), err)
	}
	if err := w.f.Truncate(max(w.off, roundUp(int64(len(head)), RecordAlign))); err != nil {
		return fmt.Errorf("expertpack: writing %s: %w", w.f.Path(), err)
	}
	if err := w.f.Commit(); err != nil {
		return fmt.Errorf("expertpack: %w", err)
	}
	return nil
}

// abort removes an unfinished pack (nothing after finish).
func (w *packWriter) abort() { w.f.Abort() }

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

// Checksum is the CRC-32C of an expert's raw weights then scales: what a
// pack entry records and every decode is checked against.
func Checksum(region, scales []byte) uint32 {
	return crc32.Update(crc32.Checksum(region, castagnoli), castagnoli, scales)
}
