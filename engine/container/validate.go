package container

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/kernels"
)

// Summary describes a container validated against its config.
type Summary struct {
	Dir     string        `json:"dir"`
	Shards  []ShardStat   `json:"shards"`
	Tensors int           `json:"tensors"`
	Formats []FormatStat  `json:"formats"`
	MTP     bool          `json:"mtp"`
	DSA     bool          `json:"dsa"`
	Experts ExpertSummary `json:"experts"`
	// ResidentBytes counts every expected tensor except routed experts.
	ResidentBytes int64 `json:"resident_bytes"`
	// RoutedBytes counts every routed expert (MTP layer included).
	RoutedBytes int64 `json:"routed_bytes"`
	// Unexpected lists tensors no role of the model claims (ignored).
	Unexpected      []string `json:"unexpected,omitempty"`
	UnexpectedBytes int64    `json:"unexpected_bytes,omitempty"`
}

// ShardStat is one safetensors file.
type ShardStat struct {
	Name    string `json:"name"`
	Bytes   int64  `json:"bytes"`
	Tensors int    `json:"tensors"`
}

// FormatStat counts the expected tensors of one storage format: matrices by
// weight format ("int4-grouped/64", ...) and 1-D float vectors ("vector").
// A quantized matrix counts once, its bytes including the scales.
type FormatStat struct {
	Format string `json:"format"`
	Count  int    `json:"count"`
	Bytes  int64  `json:"bytes"`
}

// ExpertSummary describes the routed experts.
type ExpertSummary struct {
	Count     int          `json:"count"`
	Sizes     []ExpertSize `json:"sizes"`
	Coalesced int          `json:"coalesced"`
	// Split lists the experts whose three weight blobs are not adjacent in
	// one file (they take three reads).
	Split []ExpertRef `json:"split,omitempty"`
}

// ExpertSize counts the experts of one on-disk size.
type ExpertSize struct {
	Bytes   int64  `json:"bytes"`
	Count   int    `json:"count"`
	Formats string `json:"formats"` // one name, or "gate, up, down" when they differ
}

// ExpertRef names one routed expert.
type ExpertRef struct {
	Layer  int `json:"layer"`
	Expert int `json:"expert"`
}

func (r ExpertRef) String() string { return fmt.Sprintf("layer %d expert %d", r.Layer, r.Expert) }

// ValidationError lists every problem Validate found.
type ValidationError struct {
	Dir      string
	Problems []string
}

// maxListed bounds the problems an error message prints.
const maxListed = 20

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "container: %s: %d problem(s)", e.Dir, len(e.Problems))
	for i, p := range e.Problems {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  ... and %d more", len(e.Problems)-maxListed)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(p)
	}
	return b.String()
}

type tensorKind uint8

const (
	kindVector      tensorKind = iota // 1-D float of n = rows elements
	kindMatrix                        // quantized or float [rows, cols]
	kindFloatMatrix                   // float-only [rows, cols] (the router)
)

// want is one tensor the config says the model has.
type want struct {
	name       string
	kind       tensorKind
	rows, cols int
}

// validator accumulates the checks of one Validate call.
type validator struct {
	c        *Container
	cfg      *config.Config
	problems []string
	claimed  map[string]bool
	formats  map[string]*FormatStat
	sum      *Summary
}

// Validate checks, from the headers alone, that the container holds every
// tensor cfg implies with a byte count and format that match its
// config-derived shape, decides the MTP and DSA capabilities, and
// summarizes the artifact. All problems are reported together in a
// *ValidationError.
func Validate(c *Container, cfg *config.Config) (*Summary, error) {
	v := &validator{
		c:       c,
		cfg:     cfg,
		claimed: make(map[string]bool),
		formats: make(map[string]*FormatStat),
		sum:     &Summary{Dir: c.dir, Tensors: len(c.names)},
	}
	for _, s := range c.shards {
		v.sum.Shards = append(v.sum.Shards, ShardStat{Name: s.Name, Bytes: s.Size, Tensors: s.Tensors})
	}

	H := cfg.HiddenSize
	core := []want{
		{"model.embed_tokens.weight", kindMatrix, cfg.VocabSize, H},
		{"lm_head.weight", kindMatrix, cfg.VocabSize, H},
		{"model.norm.weight", kindVector, H, 0},
	}
	sparse := cfg.SparseLayers()
	for l := 0; l < cfg.NumLayers; l++ {
		core = append(core, layerTensors(cfg, l, cfg.SparseLayer[l])...)
	}
	v.require(core)

	v.sum.DSA = v.checkDSA()
	v.checkMTP()

	if v.sum.MTP {
		sparse = append(sparse, cfg.NumLayers)
	}
	v.checkExperts(sparse)

	for _, n := range c.names {
		if !v.claimed[n] {
			v.sum.Unexpected = append(v.sum.Unexpected, n)
			v.sum.UnexpectedBytes += c.index[n].Size
		}
	}
	for _, f := range v.formats {
		v.sum.Formats = append(v.sum.Formats, *f)
	}
	sort.Slice(v.sum.Formats, func(i, j int) bool { return v.sum.Formats[i].Format < v.sum.Formats[j].Format })
	if len(v.problems) > 0 {
		return nil, &ValidationError{Dir: c.dir, Problems: v.problems}
	}
	return v.sum, nil
}

// layerTensors lists the non-expert, non-indexer tensors of decoder layer l.
func layerTensors(cfg *config.Config, l int, sparse bool) []want {
	H := cfg.HiddenSize
	nh := cfg.NumHeads
	p := fmt.Sprintf("model.layers.%d.", l)
	ws := []want{
		{p + "input_layernorm.weight", kindVector, H, 0},
		{p + "post_attention_layernorm.weight", kindVector, H, 0},
		{p + "self_attn.q_a_proj.weight", kindMatrix, cfg.QLoraRank, H},
		{p + "self_attn.q_a_layernorm.weight", kindVector, cfg.QLoraRank, 0},
		{p + "self_attn.q_b_proj.weight", kindMatrix, nh * cfg.QKHeadDim(), cfg.QLoraRank},
		{p + "self_attn.kv_a_proj_with_mqa.weight", kindMatrix, cfg.KVLoraRank + cfg.QKRopeHeadDim, H},
		{p + "self_attn.kv_a_layernorm.weight", kindVector, cfg.KVLoraRank, 0},
		{p + "self_attn.kv_b_proj.weight", kindMatrix, nh * (cfg.QKNopeHeadDim + cfg.VHeadDim), cfg.KVLoraRank},
		{p + "self_attn.o_proj.weight", kindMatrix, H, nh * cfg.VHeadDim},
	}
	if !sparse {
		D := cfg.IntermediateSize
		return append(ws,
			want{p + "mlp.gate_proj.weight", kindMatrix, D, H},
			want{p + "mlp.up_proj.weight", kindMatrix, D, H},
			want{p + "mlp.down_proj.weight", kindMatrix, H, D},
		)
	}
	ws = append(ws,
		want{p + "mlp.gate.weight", kindFloatMatrix, cfg.NumRoutedExperts, H},
		want{p + "mlp.gate.e_score_correction_bias", kindVector, cfg.NumRoutedExperts, 0},
	)
	if S := cfg.MoEIntermediateSize * cfg.NumSharedExperts; S > 0 {
		ws = append(ws,
			want{p + "mlp.shared_experts.gate_proj.weight", kindMatrix, S, H},
			want{p + "mlp.shared_experts.up_proj.weight", kindMatrix, S, H},
			want{p + "mlp.shared_experts.down_proj.weight", kindMatrix, H, S},
		)
	}
	return ws
}

// indexerTensors lists the DSA indexer tensors of layer l.
func indexerTensors(cfg *config.Config, l int) []want {
	p := fmt.Sprintf("model.layers.%d.self_attn.indexer.", l)
	nI, dI := cfg.IndexNHeads, cfg.IndexHeadDim
	return []want{
		{p + "wq_b.weight", kindMatrix, nI * dI, cfg.QLoraRank},
		{p + "wk.weight", kindMatrix, dI, cfg.HiddenSize},
		{p + "weights_proj.weight", kindMatrix, nI, cfg.HiddenSize},
		{p + "k_norm.weight", kindVector, dI, 0},
		{p + "k_norm.bias", kindVector, dI, 0},
	}
}

// mtpTensors lists the MTP layer's tensors, experts and indexer excluded.
func mtpTensors(cfg *config.Config) []want {
	H := cfg.HiddenSize
	p := fmt.Sprintf("model.layers.%d.", cfg.NumLayers)
	ws := []want{
		{p + "eh_proj.weight", kindMatrix, H, 2 * H},
		{p + "enorm.weight", kindVector, H, 0},
		{p + "hnorm.weight", kindVector, H, 0},
		{p + "shared_head.norm.weight", kindVector, H, 0},
	}
	return append(ws, layerTensors(cfg, cfg.NumLayers, true)...)
}

func (v *validator) problem(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

// missing returns the names of ws absent from the container.
func (v *validator) missing(ws []want) []string {
	var out []string
	for _, w := range ws {
		if _, ok := v.c.index[w.name]; !ok {
			out = append(out, w.name)
		}
	}
	return out
}

// require reports every missing tensor of ws and checks the present ones.
func (v *validator) require(ws []want) {
	for _, n := range v.missing(ws) {
		v.problem("tensor %q is missing", n)
	}
	v.check(ws)
}

// check validates the format of every present tensor of ws and adds it to
// the resident statistics.
func (v *validator) check(ws []want) {
	for _, w := range ws {
		t, ok := v.c.index[w.name]
		if !ok {
			continue
		}
		v.claimed[w.name] = true
		switch w.kind {
		case kindVector:
			if _, q := v.c.index[w.name+ScalesSuffix]; q {
				v.claimed[w.name+ScalesSuffix] = true
				v.problem("tensor %q in %s: a quantized vector (has %s) is not supported", w.name, t.File, ScalesSuffix)
				continue
			}
			if err := checkFloat(t, int64(w.rows)); err != nil {
				v.problem("%s", strings.TrimPrefix(err.Error(), "container: "))
				continue
			}
			v.count("vector", t.Size)
			v.sum.ResidentBytes += t.Size
		case kindMatrix, kindFloatMatrix:
			m, ok := v.matrix(w.name, w.rows, w.cols)
			if !ok {
				continue
			}
			if w.kind == kindFloatMatrix && m.Format != kernels.F32 {
				v.problem("tensor %q in %s: stored as %s, want an unquantized F32, BF16 or F16 matrix", w.name, t.File, m.FormatName())
				continue
			}
			v.sum.ResidentBytes += m.Bytes
		}
	}
}

// matrix resolves and counts one matrix, reporting a problem on failure.
func (v *validator) matrix(name string, rows, cols int) (MatrixInfo, bool) {
	v.claimed[name] = true
	if _, ok := v.c.index[name+ScalesSuffix]; ok {
		v.claimed[name+ScalesSuffix] = true
	}
	m, err := v.c.MatrixInfo(name, rows, cols)
	if err != nil {
		v.problem("%s", strings.TrimPrefix(err.Error(), "container: "))
		return m, false
	}
	v.count(m.FormatName(), m.Bytes)
	return m, true
}

func (v *validator) count(format string, bytes int64) {
	f := v.formats[format]
	if f == nil {
		f = &FormatStat{Format: format}
		v.formats[format] = f
	}
	f.Count++
	f.Bytes += bytes
}

// checkDSA decides the DSA capability: every full layer has its indexer
// (on), none has (off), or some have (a problem).
func (v *validator) checkDSA() bool {
	cfg := v.cfg
	if cfg.IndexTopK <= 0 || cfg.IndexNHeads <= 0 || cfg.IndexHeadDim <= 0 {
		return false
	}
	full := cfg.FullIndexerLayers()
	var with, without []int
	for _, l := range full {
		ws := indexerTensors(cfg, l)
		miss := v.missing(ws)
		switch {
		case len(miss) == 0:
			with = append(with, l)
		case len(miss) == len(ws):
			without = append(without, l)
		default:
			v.problem("layer %d: DSA indexer is incomplete, missing %s", l, listNames(miss))
		}
		v.check(ws)
	}
	if len(with) > 0 && len(without) > 0 {
		v.problem("DSA indexer present on full layers %v but missing on full layers %v", with, without)
	}
	return len(without) == 0 && len(with) == len(full) && len(full) > 0
}

// checkMTP decides the MTP capability: all of the MTP layer's tensors
// present (on), none (off), or some (a problem).
func (v *validator) checkMTP() {
	cfg := v.cfg
	if cfg.NumNextNPredictLayers == 0 {
		return
	}
	L := cfg.NumLayers
	ws := mtpTensors(cfg)
	for e := 0; e < cfg.NumRoutedExperts; e++ {
		for _, proj := range []string{"gate_proj", "up_proj", "down_proj"} {
			ws = append(ws, want{name: ExpertName(L, e, proj)})
		}
	}
	miss := v.missing(ws)
	if len(miss) == len(ws) {
		return
	}
	if len(miss) > 0 {
		v.problem("MTP layer %d is incomplete: %d of %d tensors missing: %s", L, len(miss), len(ws), listNames(miss))
		return
	}
	v.sum.MTP = true
	v.check(mtpTensors(cfg))
	if cfg.IndexNHeads > 0 && cfg.IndexHeadDim > 0 {
		iw := indexerTensors(cfg, L)
		if miss := v.missing(iw); len(miss) > 0 && len(miss) < len(iw) {
			v.problem("MTP layer %d: DSA indexer is incomplete, missing %s", L, listNames(miss))
		}
		v.check(iw)
	}
}

// checkExperts locates every routed expert of the given layers.
func (v *validator) checkExperts(layers []int) {
	type sizeKey struct {
		bytes   int64
		formats string
	}
	sizes := make(map[sizeKey]int)
	ex := &v.sum.Experts
	for _, l := range layers {
		for e := 0; e < v.cfg.NumRoutedExperts; e++ {
			ok := true
			for _, proj := range []string{"gate_proj", "up_proj", "down_proj"} {
				name := ExpertName(l, e, proj)
				if _, present := v.c.index[name]; !present {
					v.problem("tensor %q is missing", name)
					ok = false
				}
			}
			if !ok {
				continue
			}
			var failed bool
			for _, m := range []struct {
				proj       string
				rows, cols int
			}{
				{"gate_proj", v.cfg.MoEIntermediateSize, v.cfg.HiddenSize},
				{"up_proj", v.cfg.MoEIntermediateSize, v.cfg.HiddenSize},
				{"down_proj", v.cfg.HiddenSize, v.cfg.MoEIntermediateSize},
			} {
				if _, ok := v.matrix(ExpertName(l, e, m.proj), m.rows, m.cols); !ok {
					failed = true
				}
			}
			if failed {
				continue
			}
			loc, err := v.c.Expert(l, e, v.cfg)
			if err != nil {
				v.problem("%s", strings.TrimPrefix(err.Error(), "container: "))
				continue
			}
			ex.Count++
			v.sum.RoutedBytes += loc.Bytes()
			sizes[sizeKey{loc.Bytes(), expertFormats(loc)}]++
			if loc.Coalesced {
				ex.Coalesced++
			} else {
				ex.Split = append(ex.Split, ExpertRef{Layer: l, Expert: e})
			}
		}
	}
	for k, n := range sizes {
		ex.Sizes = append(ex.Sizes, ExpertSize{Bytes: k.bytes, Count: n, Formats: k.formats})
	}
	sort.Slice(ex.Sizes, func(i, j int) bool {
		a, b := ex.Sizes[i], ex.Sizes[j]
		if a.Bytes != b.Bytes {
			return a.Bytes < b.Bytes
		}
		return a.Formats < b.Formats
	})
}

// expertFormats names the formats of an expert's matrices: one name when
// they agree, else the gate, up and down formats.
func expertFormats(loc ExpertLocation) string {
	g, u, d := loc.Gate.FormatName(), loc.Up.FormatName(), loc.Down.FormatName()
	if g == u && u == d {
		return g
	}
	return g + ", " + u + ", " + d
}

// listNames quotes up to a few names and counts the rest.
func listNames(names []string) string {
	const show = 5
	var b strings.Builder
	for i, n := range names {
		if i == show {
			fmt.Fprintf(&b, " and %d more", len(names)-show)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", n)
	}
	return b.String()
}
