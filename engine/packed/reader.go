package packed

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/native/diskio"
)

// Reader reads the experts whose raw bytes a model directory released,
// from their packs, for readers that take experts whole (experts kept in
// memory). Its methods are safe for concurrent use; Close must not race
// with them.
type Reader struct {
	c     *container.Container
	cfg   *config.Config
	packs map[string]*openPack // by shard: released packs only
}

type openPack struct {
	path  string
	f     *diskio.DirectFile
	index *expertpack.Index
	mu    sync.Mutex // one decode at a time: slab is shared
	slab  []byte
}

// OpenReader opens the released packs of the model in dir (open as c,
// with config cfg, whose record is rec). A released pack that cannot be
// used is an error: its experts exist nowhere else. With no record, or
// nothing released, the Reader reads nothing (Has is always false).
func OpenReader(dir string, c *container.Container, cfg *config.Config, rec *Record) (*Reader, error) {
	r := &Reader{c: c, cfg: cfg, packs: map[string]*openPack{}}
	for _, sh := range c.Shards() {
		if !rec.Released(sh.Name) {
			continue
		}
		path := expertpack.PackPath(filepath.Join(dir, sh.Name))
		x, err := expertpack.ReadIndex(path)
		if err == nil {
			err = x.Check(dir)
		}
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("packed: %w: %v", ErrPackUnusable, unusable(sh.Name, err))
		}
		f, err := diskio.OpenBuffered(path)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("packed: %w", err)
		}
		r.packs[sh.Name] = &openPack{path: path, f: f, index: x}
	}
	return r, nil
}

// ErrPackUnusable is wrapped when a pack that holds the only copy of its
// experts cannot be read.
var ErrPackUnusable = errors.New("a pack holding the only copy of its experts cannot be used")

func unusable(shard string, err error) error {
	return fmt.Errorf("%s's routed experts exist only in its pack: %w; "+
		"restore the pack, or fetch the model again", shard, err)
}

// Has reports whether the expert's raw bytes were released (ReadExpert
// decodes it from its pack).
func (r *Reader) Has(loc container.ExpertLocation) bool {
	_, _, ok := r.lookup(loc)
	return ok
}

func (r *Reader) lookup(loc container.ExpertLocation) (*openPack, expertpack.Entry, bool) {
	if len(r.packs) == 0 || len(loc.Weights) == 0 {
		return nil, expertpack.Entry{}, false
	}
	p := r.packs[loc.Weights[0].File]
	if p == nil {
		return nil, expertpack.Entry{}, false
	}
	e, ok := p.index.Lookup(loc.Layer, loc.Expert)
	return p, e, ok
}

// ReadExpert decodes a released expert from its pack into buf (at least
// loc.BufferSize() bytes) as container.ReadExpert lays it out, and returns
// its matrices, which point into buf. A record that fails its checks is
// an error naming the pack and the expert, wrapping expertpack.ErrCorrupt.
func (r *Reader) ReadExpert(loc container.ExpertLocation, buf []byte) (gate, up, down *kernels.Matrix, err error) {
	p, e, ok := r.lookup(loc)
	if !ok {
		return nil, nil, nil, fmt.Errorf("packed: layer %d expert %d is not in a released pack", loc.Layer, loc.Expert)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if need := max(e.PackedSlabNeed(), loc.WeightBytes); int64(len(p.slab)) < need {
		p.slab = diskio.AlignedBuffer(int(need))
	}
	region, scales, err := expertpack.DecodeEntry(p.f, p.slab, e)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("packed: %s: layer %d expert %d: %w", p.path, loc.Layer, loc.Expert, err)
	}
	if int64(len(region)) != loc.WeightBytes || int64(len(scales)) != loc.ScaleBytes {
		return nil, nil, nil, fmt.Errorf("packed: %s: layer %d expert %d: %w: the record holds %d weight and %d scale bytes, the expert has %d and %d",
			p.path, loc.Layer, loc.Expert, expertpack.ErrCorrupt, len(region), len(scales), loc.WeightBytes, loc.ScaleBytes)
	}
	if int64(len(buf)) < loc.BufferSize() {
		return nil, nil, nil, fmt.Errorf("packed: a buffer of %d bytes for an expert of %d", len(buf), loc.BufferSize())
	}
	copy(buf, region)
	copy(buf[(loc.WeightBytes+63)/64*64:], scales)
	return loc.Matrices(buf)
}

// Close closes the packs.
func (r *Reader) Close() error {
	var errs []error
	for _, p := range r.packs {
		errs = append(errs, p.f.Close())
	}
	r.packs = nil
	return errors.Join(errs...)
}
