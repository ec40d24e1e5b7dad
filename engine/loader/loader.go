package loader

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/fingerprint"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/native/offheap"
)

// Options configure Open.
type Options struct {
	Model model.Options
	// Experts, when set, builds the routed-expert source; the default keeps
	// every expert resident in memory.
	Experts func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error)
}

// Dir is an opened model directory.
type Dir struct {
	Path      string
	Config    *config.Config
	Container *container.Container
	Summary   *container.Summary
	Model     *model.Model
	// Experts is the routed-expert source the model reads from.
	Experts experts.Source

	arena     []byte // the resident weights, when the experts stream
	arenaUsed int
	weights   *fingerprint.Hash // Fingerprint's result, once computed
}

// Open loads the model in dir: OpenHeaders, then Load.
func Open(ctx context.Context, dir string, opts Options) (*Dir, error) {
	d, err := OpenHeaders(dir)
	if err != nil {
		return nil, err
	}
	if err := d.Load(ctx, opts); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// OpenHeaders reads the config, opens the container and validates every
// header against the config; it reads no weight. The caller plans memory
// from Summary, then calls Load (or Close).
func OpenHeaders(dir string) (*Dir, error) {
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, err
	}
	c, err := container.Open(dir)
	if err != nil {
		return nil, err
	}
	sum, err := container.Validate(c, cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &Dir{Path: dir, Config: cfg, Container: c, Summary: sum}, nil
}

// Load sets up the routed-expert source and reads the resident weights
// into the model. On error the caller still closes the Dir.
func (d *Dir) Load(ctx context.Context, opts Options) error {
	if d.Model != nil {
		return fmt.Errorf("loader: %s is already loaded", d.Path)
	}
	cfg, c := d.Config, d.Container
	w := &Weights{C: c}
	caps, err := model.DetectCapabilities(cfg, w)
	if err != nil {
		return err
	}
	layers := model.ExpertLayers(cfg, caps.MTP && !opts.Model.DisableMTP)
	if opts.Experts != nil {
		// The resident weights are copied into one arena outside the Go
		// heap (the plan's resident weights line); the routed experts stay
		// on disk. A shard truncated under a running model then fails the
		// expert reads with an error instead of faulting a mapping.
		resident := d.Summary.ResidentBytes
		if opts.Model.EmbeddingRows > 0 {
			// The embedding table is read by row on demand, not kept.
			info, err := c.MatrixInfo(plan.EmbeddingTensor, cfg.VocabSize, cfg.HiddenSize)
			if err != nil {
				return err
			}
			resident -= info.Bytes
		}
		if d.arena, err = offheap.AllocAligned(int(resident)+arenaAlign*2*len(c.Names()), arenaAlign); err != nil {
			return fmt.Errorf("loader: resident weights arena: %w", err)
		}
		w.arena = d.arena
		d.Experts, err = opts.Experts(ctx, c, cfg, layers)
		if err != nil {
			// A source that failed to build released what it held; it
			// may come back as a nil of its type inside the interface,
			// which Close must not call.
			d.Experts = nil
		}
	} else {
		// Everything stays in memory: map each shard once and view it.
		if err := c.Preload(); err != nil {
			return err
		}
		d.Experts, err = experts.LoadResident(ctx, ExpertLoader{C: c, Config: cfg}, layers, cfg.NumRoutedExperts)
	}
	if err != nil {
		return err
	}
	if d.Model, err = model.Load(cfg, w, d.Experts, opts.Model); err != nil {
		return err
	}
	d.arenaUsed = w.used
	return nil
}

// Close releases the expert source (when it holds resources), the
// container's files and the resident weights' arena; the model must not be
// used afterwards.
func (d *Dir) Close() error {
	err := errors.Join(closeSource(d.Experts), d.Container.Close())
	if d.arena != nil {
		err = errors.Join(err, offheap.Free(d.arena))
		d.arena = nil
	}
	return err
}

func closeSource(src experts.Source) error {
	if c, ok := src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Weights adapts a container to model.Weights.
type Weights struct {
	C *container.Container
	// arena, when set, receives every matrix read (see Dir.Load).
	arena []byte
	used  int
}

// arenaAlign aligns each matrix's bytes in the arena (the kernels' widest
// vector loads).
const arenaAlign = 64

// Has implements model.Weights.
func (w *Weights) Has(name string) bool { _, ok := w.C.Tensor(name); return ok }

// F32 implements model.Weights.
func (w *Weights) F32(name string, n int) ([]float32, error) { return w.C.F32(name, n) }

// Matrix implements model.Weights.
func (w *Weights) Matrix(name string, rows, cols int) (*kernels.Matrix, error) {
	if w.arena == nil {
		return w.C.Matrix(name, rows, cols)
	}
	info, err := w.C.MatrixInfo(name, rows, cols)
	if err != nil {
		return nil, err
	}
	var short bool
	m, err := w.C.ReadMatrixInto(info, func(n int) []byte {
		start := (w.used + arenaAlign - 1) / arenaAlign * arenaAlign
		if start+n > len(w.arena) {
			short = true
			return make([]byte, n)
		}
		w.used = start + n
		return w.arena[start:w.used:w.used]
	})
	if err == nil && short {
		err = fmt.Errorf("loader: the resident weights arena of %d bytes is full at %s (the headers count fewer resident bytes)", len(w.arena), name)
	}
	return m, err
}

// MatrixRows implements model.RowWeights: rows are read from the
// container (the preloaded shards, else the files) as they are asked for.
func (w *Weights) MatrixRows(name string, rows, cols int) (model.MatrixRows, error) {
	info, err := w.C.MatrixInfo(name, rows, cols)
	if err != nil {
		return nil, err
	}
	return matrixRows{c: w.C, info: info}, nil
}

// matrixRows reads single rows of one matrix of a container.
type matrixRows struct {
	c    *container.Container
	info container.MatrixInfo
}

func (m matrixRows) RowBytes() int { return m.info.RowBytes() }

func (m matrixRows) ReadRow(r int, buf []byte) (*kernels.Matrix, error) {
	return m.c.ReadMatrixRow(m.info, r, buf)
}

// ExpertLoader reads routed experts from a container into fresh memory.
type ExpertLoader struct {
	C      *container.Container
	Config *config.Config
}

// LoadExpert implements experts.Loader.
func (l ExpertLoader) LoadExpert(layer, expert int) (*experts.Expert, error) {
	loc, err := l.C.Expert(layer, expert, l.Config)
	if err != nil {
		return nil, err
	}
	if l.C.Preloaded() {
		g, u, dn, err := l.C.ViewExpert(loc)
		if err != nil {
			return nil, err
		}
		return &experts.Expert{Gate: g, Up: u, Down: dn}, nil
	}
	buf := make([]byte, loc.BufferSize())
	g, u, dn, err := l.C.ReadExpert(loc, buf)
	if err != nil {
		return nil, fmt.Errorf("reading expert: %w", err)
	}
	return &experts.Expert{Gate: g, Up: u, Down: dn}, nil
}
