package container

import (
	"fmt"
	"sort"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/kernels"
)

// Extent is a byte range of one shard.
type Extent struct {
	File   string
	Offset int64
	Length int64
}

// ExpertLocation says where the three matrices of one routed expert live.
type ExpertLocation struct {
	Layer, Expert  int
	Gate, Up, Down MatrixInfo
	// Coalesced is true when the three weight blobs are adjacent in one
	// file (in any order): Weights is then a single extent read at once.
	Coalesced bool
	// Weights holds one extent when Coalesced, else the gate, up and down
	// weight extents.
	Weights []Extent
	// Scales holds one extent when the three scale tensors are adjacent in
	// one file, else one per quantized matrix (gate, up, down order); it is
	// empty for unquantized experts.
	Scales      []Extent
	WeightBytes int64
	ScaleBytes  int64
}

// Bytes is the expert's size on disk (weights plus scales).
func (l ExpertLocation) Bytes() int64 { return l.WeightBytes + l.ScaleBytes }

// BufferSize is the byte length ReadExpert needs: the weights, padded to
// 64 bytes, then the scales.
func (l ExpertLocation) BufferSize() int64 { return alignUp(l.WeightBytes, 64) + l.ScaleBytes }

// Reads is the number of read calls ReadExpert issues.
func (l ExpertLocation) Reads() int { return len(l.Weights) + len(l.Scales) }

// ExpertName is the tensor name of projection proj ("gate_proj", "up_proj"
// or "down_proj") of routed expert e in layer l.
func ExpertName(layer, expert int, proj string) string {
	return fmt.Sprintf("model.layers.%d.mlp.experts.%d.%s.weight", layer, expert, proj)
}

// Expert locates routed expert e of layer l (a sparse layer, or the MTP
// layer cfg.NumLayers): gate and up are [moe_intermediate, hidden], down is
// [hidden, moe_intermediate].
func (c *Container) Expert(layer, expert int, cfg *config.Config) (ExpertLocation, error) {
	loc := ExpertLocation{Layer: layer, Expert: expert}
	mtp := layer == cfg.NumLayers && cfg.NumNextNPredictLayers > 0
	if !mtp && (layer < 0 || layer >= cfg.NumLayers || !cfg.SparseLayer[layer]) {
		return loc, fmt.Errorf("container: layer %d has no routed experts", layer)
	}
	if expert < 0 || expert >= cfg.NumRoutedExperts {
		return loc, fmt.Errorf("container: expert %d is out of range (0..%d)", expert, cfg.NumRoutedExperts-1)
	}
	H, I := cfg.HiddenSize, cfg.MoEIntermediateSize
	var err error
	if loc.Gate, err = c.MatrixInfo(ExpertName(layer, expert, "gate_proj"), I, H); err != nil {
		return loc, err
	}
	if loc.Up, err = c.MatrixInfo(ExpertName(layer, expert, "up_proj"), I, H); err != nil {
		return loc, err
	}
	if loc.Down, err = c.MatrixInfo(ExpertName(layer, expert, "down_proj"), H, I); err != nil {
		return loc, err
	}
	ms := []*MatrixInfo{&loc.Gate, &loc.Up, &loc.Down}
	var weights, scales []TensorInfo
	for _, m := range ms {
		weights = append(weights, m.Weight)
		loc.WeightBytes += m.Weight.Size
		if m.Quantized() {
			scales = append(scales, m.Scales)
			loc.ScaleBytes += m.Scales.Size
		}
	}
	loc.Weights, loc.Coalesced = extents(weights)
	loc.Scales, _ = extents(scales)
	return loc, nil
}

// extents returns one extent covering ts when they are back to back in
// one file (in any order), else one extent per tensor in the given order.
func extents(ts []TensorInfo) ([]Extent, bool) {
	if len(ts) == 0 {
		return nil, false
	}
	sorted := append([]TensorInfo(nil), ts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Offset < sorted[j].Offset })
	adjacent := true
	for i := 1; i < len(sorted); i++ {
		p, t := sorted[i-1], sorted[i]
		adjacent = adjacent && t.File == p.File && p.Offset+p.Size == t.Offset
	}
	if adjacent {
		first, last := sorted[0], sorted[len(sorted)-1]
		return []Extent{{File: first.File, Offset: first.Offset, Length: last.Offset + last.Size - first.Offset}}, true
	}
	out := make([]Extent, len(ts))
	for i, t := range ts {
		out[i] = t.extent()
	}
	return out, false
}

// ReadExpert reads a located expert into buf (at least loc.BufferSize()
// bytes; one read for the weights when coalesced, one for the scales when
// adjacent) and returns its matrices, which point into buf.
func (c *Container) ReadExpert(loc ExpertLocation, buf []byte) (gate, up, down *kernels.Matrix, err error) {
	need := loc.BufferSize()
	if int64(len(buf)) < need {
		return nil, nil, nil, fmt.Errorf("container: expert %d of layer %d needs a %d byte buffer, got %d", loc.Expert, loc.Layer, need, len(buf))
	}
	scaleBase := alignUp(loc.WeightBytes, 64)
	wpos, err := c.readExtents(loc.Weights, buf, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("expert %d of layer %d: %w", loc.Expert, loc.Layer, err)
	}
	spos, err := c.readExtents(loc.Scales, buf, scaleBase)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("expert %d of layer %d: %w", loc.Expert, loc.Layer, err)
	}
	return loc.matrices(buf, wpos, spos)
}

// Matrices returns the matrices of an expert whose bytes are in buf as
// ReadExpert lays them out: its weight extents concatenated from offset
// 0, its scale extents concatenated from offset alignUp(WeightBytes, 64)
// (an expert decoded from its pack is put there). They point into buf.
func (loc ExpertLocation) Matrices(buf []byte) (gate, up, down *kernels.Matrix, err error) {
	if int64(len(buf)) < loc.BufferSize() {
		return nil, nil, nil, fmt.Errorf("container: expert %d of layer %d needs a %d byte buffer, got %d", loc.Expert, loc.Layer, loc.BufferSize(), len(buf))
	}
	positions := func(es []Extent, base int64) []int64 {
		pos := make([]int64, len(es))
		for i, e := range es {
			pos[i] = base
			base += e.Length
		}
		return pos
	}
	return loc.matrices(buf, positions(loc.Weights, 0), positions(loc.Scales, alignUp(loc.WeightBytes, 64)))
}

func (loc ExpertLocation) matrices(buf []byte, wpos, spos []int64) (gate, up, down *kernels.Matrix, err error) {
	var out [3]*kernels.Matrix
	for i, info := range []MatrixInfo{loc.Gate, loc.Up, loc.Down} {
		m := &kernels.Matrix{Format: info.Format, Rows: info.Rows, Cols: info.Cols, GroupSize: info.GroupSize}
		w, err := slice(buf, loc.Weights, wpos, info.Weight)
		if err != nil {
			return nil, nil, nil, err
		}
		if info.Format == kernels.F32 {
			m.F32 = floatView(info.Weight.DType, w)
		} else {
			m.Data = w
			s, err := slice(buf, loc.Scales, spos, info.Scales)
			if err != nil {
				return nil, nil, nil, err
			}
			m.Scales = floatView("F32", s)
		}
		if err := m.Validate(); err != nil {
			return nil, nil, nil, fmt.Errorf("container: tensor %q: %w", info.Name, err)
		}
		out[i] = m
	}
	return out[0], out[1], out[2], nil
}

// readExtents reads es back to back into buf starting at base and returns
// each extent's position in buf.
func (c *Container) readExtents(es []Extent, buf []byte, base int64) ([]int64, error) {
	pos := make([]int64, len(es))
	p := base
	for i, e := range es {
		pos[i] = p
		if err := c.ReadExtent(e, buf[p:p+e.Length]); err != nil {
			return nil, err
		}
		p += e.Length
	}
	return pos, nil
}

// slice finds tensor t inside the extents read at positions pos of buf.
func slice(buf []byte, es []Extent, pos []int64, t TensorInfo) ([]byte, error) {
	for i, e := range es {
		if e.File == t.File && t.Offset >= e.Offset && t.Offset+t.Size <= e.Offset+e.Length {
			p := pos[i] + t.Offset - e.Offset
			return buf[p : p+t.Size : p+t.Size], nil
		}
	}
	return nil, fmt.Errorf("container: tensor %q is not inside the expert's extents", t.Name)
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// ViewExpert returns a located expert's matrices as views of preloaded
// shard memory (see Preload); it reads nothing.
func (c *Container) ViewExpert(loc ExpertLocation) (gate, up, down *kernels.Matrix, err error) {
	var out [3]*kernels.Matrix
	for i, info := range []MatrixInfo{loc.Gate, loc.Up, loc.Down} {
		m, ok := c.viewMatrix(info)
		if !ok {
			return nil, nil, nil, fmt.Errorf("container: expert %d of layer %d is not preloaded", loc.Expert, loc.Layer)
		}
		if err := m.Validate(); err != nil {
			return nil, nil, nil, fmt.Errorf("container: tensor %q: %w", info.Name, err)
		}
		out[i] = m
	}
	return out[0], out[1], out[2], nil
}
