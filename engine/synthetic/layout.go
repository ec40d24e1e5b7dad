package synthetic

import (
	"fmt"
	"math"
	"strings"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
)

// fill says how a tensor's payload is generated.
type fill uint8

const (
	fillInt4       fill = iota // packed int4 codes, symmetric about 0 (see fillChunk)
	fillInt8                   // int8 codes, symmetric about 0
	fillScales                 // F32 quantization scales in [0.75, 1.25) x base
	fillUniform                // F32 uniform values with standard deviation base
	fillOnes                   // F32 ones (norm weights)
	fillZeros                  // F32 zeros (router correction bias of the small models)
	fillNormalInt4             // int4 codes of normal weights (CodesNormal), row bytes apart
	fillEye                    // int8 rows of the identity (1 at column r of row r, scaled by 1/127), row bytes apart
	fillConst                  // F32 values all base
	fillBigram                 // int8 codes, with the rows of bigram copied from the embedding's (a bench MTP's lm_head)
)

// biasStd is the standard deviation of the skeleton's router correction
// biases: small against the spread of the sigmoid scores (about 0.2 for
// unit-variance router logits), as a trained model's are, so that they
// shift the selection a little without crowding it onto a few experts.
const biasStd = 0.02

// tensor is one tensor of a shard and how to fill it.
type tensor struct {
	name  string
	dtype string
	shape []int64
	size  int64
	fill  fill
	base  float32
	row   int64 // bytes per matrix row, for fills drawn row by row
	// routing marks the tensors a prompt's routing depends on (the
	// embedding, the norms, the routers and their correction biases): the
	// sparse-files skeleton writes their values and leaves the rest holes.
	routing bool
	// hole leaves the payload a hole whatever the shard's holes (tests).
	hole bool
	// bigram is fillBigram's rows.
	bigram *bigramRows
	// loud marks the tensors of a bench MTP layer's loud experts.
	loud bool
}

// quant is the storage of one quantized matrix.
type quant uint8

const (
	int4Row quant = iota
	int4Group64
	int8Row
)

// Standard deviations of the random codes: int4 values -7..7 and int8
// values -127..127, each uniform but for 0, which is twice as likely (the
// one code without a mirror image, -8 or -128, becomes 0). The codes are
// symmetric about 0 as a trained model's are: uniform nibbles 0..15 minus 8
// average -0.5, and that bias, the same in every row, gives every
// projection a shared direction that the routers then prefer, so a prompt
// would crowd onto a few experts instead of spreading over them.
const (
	int4Std = 4.183300132670378 // sqrt(2 (1²+...+7²) / 16)
	int8Std = 73.4676799688135  // sqrt(2 (1²+...+127²) / 256)
)

// quantized returns the weight and scale tensors of W[rows, cols]. Scales
// make each element's standard deviation 1/sqrt(cols), so that a matrix
// applied to a vector of unit-variance elements keeps unit variance.
func quantized(name string, rows, cols int, q quant) (w, qs tensor) {
	R, C := int64(rows), int64(cols)
	var wBytes, nScales int64
	var std float64
	switch q {
	case int8Row:
		wBytes, nScales, std = R*C, R, int8Std
	case int4Group64:
		wBytes, nScales, std = R*((C+1)/2), R*((C+63)/64), int4Std
	default:
		wBytes, nScales, std = R*((C+1)/2), R, int4Std
	}
	codes := fillInt4
	if q == int8Row {
		codes = fillInt8
	}
	w = tensor{name: name, dtype: "U8", shape: []int64{wBytes}, size: wBytes, fill: codes}
	qs = tensor{
		name: name + container.ScalesSuffix, dtype: "F32", shape: []int64{nScales}, size: 4 * nScales,
		fill: fillScales, base: float32(1 / (std * math.Sqrt(float64(cols)))),
	}
	return w, qs
}

// vector is an F32 vector: a norm's weights or a router's biases, which
// routing depends on.
func vector(name string, n int, f fill) tensor {
	return tensor{name: name, dtype: "F32", shape: []int64{int64(n)}, size: 4 * int64(n), fill: f, routing: true}
}

// shardSpec is one safetensors file: its name and tensors in file order.
type shardSpec struct {
	name    string
	tensors []tensor
}

func (s *shardSpec) add(ts ...tensor) { s.tensors = append(s.tensors, ts...) }

func (s *shardSpec) matrix(name string, rows, cols int, q quant) {
	w, qs := quantized(name, rows, cols, q)
	s.add(w, qs)
}

// layout lists the shards of the model c: out-00000 holds every
// non-routed tensor of the decoder; out-00001.. one sparse layer's
// experts each; out-mtp-00000 the MTP layer (int8 per row) and its
// experts. Each expert's three weight blobs are adjacent (one read), then
// its three scale arrays (a second read).
func layout(c *config.Config, int4 quant) []shardSpec {
	H := c.HiddenSize
	core := shardSpec{name: "out-00000.safetensors"}
	embed, embedScales := quantized("model.embed_tokens.weight", c.VocabSize, H, int8Row)
	// Embedding rows enter the residual stream directly: unit-variance elements.
	embedScales.base = 1 / int8Std
	embed.routing, embedScales.routing = true, true
	core.add(embed, embedScales)
	core.matrix("lm_head.weight", c.VocabSize, H, int8Row)
	core.add(vector("model.norm.weight", H, fillOnes))
	for l := 0; l < c.NumLayers; l++ {
		layerTensors(&core, c, l, c.SparseLayer[l], int4)
	}
	shards := []shardSpec{core}
	for _, l := range c.SparseLayers() {
		s := shardSpec{name: fmt.Sprintf("out-%05d.safetensors", len(shards))}
		routedExperts(&s, c, l, int4)
		shards = append(shards, s)
	}
	if c.NumNextNPredictLayers > 0 {
		L := c.NumLayers
		p := fmt.Sprintf("model.layers.%d.", L)
		s := shardSpec{name: "out-mtp-00000.safetensors"}
		s.matrix(p+"eh_proj.weight", H, 2*H, int8Row)
		s.add(vector(p+"enorm.weight", H, fillOnes), vector(p+"hnorm.weight", H, fillOnes), vector(p+"shared_head.norm.weight", H, fillOnes))
		layerTensors(&s, c, L, true, int8Row)
		routedExperts(&s, c, L, int8Row)
		shards = append(shards, s)
	}
	return shards
}

// layerTensors adds decoder layer l's tensors, routed experts excluded.
func layerTensors(s *shardSpec, c *config.Config, l int, sparse bool, q quant) {
	H, nh := c.HiddenSize, c.NumHeads
	p := fmt.Sprintf("model.layers.%d.", l)
	s.add(vector(p+"input_layernorm.weight", H, fillOnes), vector(p+"post_attention_layernorm.weight", H, fillOnes))
	s.matrix(p+"self_attn.q_a_proj.weight", c.QLoraRank, H, q)
	s.add(vector(p+"self_attn.q_a_layernorm.weight", c.QLoraRank, fillOnes))
	s.matrix(p+"self_attn.q_b_proj.weight", nh*(c.QKNopeHeadDim+c.QKRopeHeadDim), c.QLoraRank, q)
	s.matrix(p+"self_attn.kv_a_proj_with_mqa.weight", c.KVLoraRank+c.QKRopeHeadDim, H, q)
	s.add(vector(p+"self_attn.kv_a_layernorm.weight", c.KVLoraRank, fillOnes))
	s.matrix(p+"self_attn.kv_b_proj.weight", nh*(c.QKNopeHeadDim+c.VHeadDim), c.KVLoraRank, q)
	s.matrix(p+"self_attn.o_proj.weight", H, nh*c.VHeadDim, q)
	if !sparse {
		D := c.IntermediateSize
		s.matrix(p+"mlp.gate_proj.weight", D, H, q)
		s.matrix(p+"mlp.up_proj.weight", D, H, q)
		s.matrix(p+"mlp.down_proj.weight", H, D, q)
		return
	}
	E := c.NumRoutedExperts
	s.add(tensor{
		name: p + "mlp.gate.weight", dtype: "F32", shape: []int64{int64(E), int64(H)}, size: 4 * int64(E) * int64(H),
		fill: fillUniform, base: float32(1 / math.Sqrt(float64(H))), routing: true,
	})
	s.add(vector(p+"mlp.gate.e_score_correction_bias", E, fillZeros))
	if S := c.MoEIntermediateSize * c.NumSharedExperts; S > 0 {
		s.matrix(p+"mlp.shared_experts.gate_proj.weight", S, H, q)
		s.matrix(p+"mlp.shared_experts.up_proj.weight", S, H, q)
		s.matrix(p+"mlp.shared_experts.down_proj.weight", H, S, q)
	}
}

// routedExperts adds every routed expert of layer l: per expert the gate, up and
// down weights back to back, then their scales.
func routedExperts(s *shardSpec, c *config.Config, l int, q quant) {
	H, I := c.HiddenSize, c.MoEIntermediateSize
	for e := 0; e < c.NumRoutedExperts; e++ {
		gw, gs := quantized(container.ExpertName(l, e, "gate_proj"), I, H, q)
		uw, us := quantized(container.ExpertName(l, e, "up_proj"), I, H, q)
		dw, ds := quantized(container.ExpertName(l, e, "down_proj"), H, I, q)
		s.add(gw, uw, dw, gs, us, ds)
	}
}

// seedBiases gives the router correction biases of shards seeded values
// (standard deviation biasStd), as a trained model's are: the skeleton's.
// The small models keep zero biases, so that their bytes do not change.
func seedBiases(shards []shardSpec) {
	for i := range shards {
		for j := range shards[i].tensors {
			t := &shards[i].tensors[j]
			if strings.HasSuffix(t.name, ".e_score_correction_bias") {
				t.fill, t.base = fillUniform, biasStd
			}
		}
	}
}

// routingBytes is the payload of the tensors marked routing in shards:
// what the sparse-files skeleton writes.
func routingBytes(shards []shardSpec) int64 {
	var n int64
	for _, s := range shards {
		for _, t := range s.tensors {
			if t.routing {
				n += t.size
			}
		}
	}
	return n
}
