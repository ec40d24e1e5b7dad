package model

import (
	"fmt"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/kernels"
)

// Weights is where the model reads its resident tensors from (the container).
type Weights interface {
	// Has reports whether a tensor of that name exists.
	Has(name string) bool
	// F32 reads a float vector of exactly n values.
	F32(name string, n int) ([]float32, error)
	// Matrix reads a weight matrix of config-derived shape [rows, cols].
	Matrix(name string, rows, cols int) (*kernels.Matrix, error)
}

// RowWeights is Weights that can also read single rows of a matrix on
// demand (a container): with Options.EmbeddingRows the model reads its
// embedding table a row at a time through it instead of keeping the table.
type RowWeights interface {
	Weights
	// MatrixRows opens weight name, a [rows, cols] matrix, for row reads.
	MatrixRows(name string, rows, cols int) (MatrixRows, error)
}

// MatrixRows reads single rows of one matrix.
type MatrixRows interface {
	// RowBytes is the bytes of one row: its weights and scales.
	RowBytes() int
	// ReadRow reads row r into buf (RowBytes long) and returns it as a
	// one-row matrix over buf.
	ReadRow(r int, buf []byte) (*kernels.Matrix, error)
}

// mlp is a gated SiLU MLP: down(silu(gate x) * up x).
type mlp struct {
	gate, up, down *kernels.Matrix
}

type indexer struct {
	wqB     *kernels.Matrix // [nI*dI, qLora]
	wk      *kernels.Matrix // [dI, H]
	weights *kernels.Matrix // [nI, H]
	kNormW  []float32
	kNormB  []float32
}

type layer struct {
	index     int
	inputNorm []float32
	postNorm  []float32

	qA, qB, kvA, kvB, o *kernels.Matrix
	qANorm, kvANorm     []float32

	indexer  *indexer // nil on shared layers or when DSA is absent
	fullDSA  bool     // this layer computes a DSA selection (own indexer)
	dense    *mlp     // dense layers
	router   *kernels.Matrix
	bias     []float32
	shared   *mlp
	isSparse bool
	mtp      bool // the MTP layer's block: its cache is the sequence's MTP cache
}

type mtpHead struct {
	enorm, hnorm, headNorm []float32
	ehProj                 *kernels.Matrix // [H, 2H]
	block                  *layer
}

// loader reads tensors by name and remembers the first error.
type loader struct {
	w   Weights
	err error
}

func (ld *loader) vec(name string, n int) []float32 {
	if ld.err != nil {
		return nil
	}
	v, err := ld.w.F32(name, n)
	if err != nil {
		ld.err = fmt.Errorf("model: %s: %w", name, err)
	}
	return v
}

func (ld *loader) mat(name string, rows, cols int) *kernels.Matrix {
	if ld.err != nil {
		return nil
	}
	m, err := ld.w.Matrix(name, rows, cols)
	if err != nil {
		ld.err = fmt.Errorf("model: %s: %w", name, err)
	}
	return m
}

func (ld *loader) mlp(prefix string, hidden, inter int) *mlp {
	return &mlp{
		gate: ld.mat(prefix+"gate_proj.weight", inter, hidden),
		up:   ld.mat(prefix+"up_proj.weight", inter, hidden),
		down: ld.mat(prefix+"down_proj.weight", hidden, inter),
	}
}

// loadLayer reads decoder layer l's resident tensors. sparse selects the MoE
// MLP; withIndexer loads the DSA indexer.
func (ld *loader) layer(c *config.Config, l int, sparse, withIndexer bool) *layer {
	p := fmt.Sprintf("model.layers.%d.", l)
	H := c.HiddenSize
	nh := c.NumHeads
	y := &layer{
		index:     l,
		isSparse:  sparse,
		inputNorm: ld.vec(p+"input_layernorm.weight", H),
		postNorm:  ld.vec(p+"post_attention_layernorm.weight", H),
		qA:        ld.mat(p+"self_attn.q_a_proj.weight", c.QLoraRank, H),
		qANorm:    ld.vec(p+"self_attn.q_a_layernorm.weight", c.QLoraRank),
		qB:        ld.mat(p+"self_attn.q_b_proj.weight", nh*c.QKHeadDim(), c.QLoraRank),
		kvA:       ld.mat(p+"self_attn.kv_a_proj_with_mqa.weight", c.KVLoraRank+c.QKRopeHeadDim, H),
		kvANorm:   ld.vec(p+"self_attn.kv_a_layernorm.weight", c.KVLoraRank),
		kvB:       ld.mat(p+"self_attn.kv_b_proj.weight", nh*(c.QKNopeHeadDim+c.VHeadDim), c.KVLoraRank),
		o:         ld.mat(p+"self_attn.o_proj.weight", H, nh*c.VHeadDim),
	}
	if withIndexer {
		ip := p + "self_attn.indexer."
		y.indexer = &indexer{
			wqB:     ld.mat(ip+"wq_b.weight", c.IndexNHeads*c.IndexHeadDim, c.QLoraRank),
			wk:      ld.mat(ip+"wk.weight", c.IndexHeadDim, H),
			weights: ld.mat(ip+"weights_proj.weight", c.IndexNHeads, H),
			kNormW:  ld.vec(ip+"k_norm.weight", c.IndexHeadDim),
			kNormB:  ld.vec(ip+"k_norm.bias", c.IndexHeadDim),
		}
	}
	if sparse {
		y.router = ld.mat(p+"mlp.gate.weight", c.NumRoutedExperts, H)
		y.bias = ld.vec(p+"mlp.gate.e_score_correction_bias", c.NumRoutedExperts)
		if c.NumSharedExperts > 0 {
			y.shared = ld.mlp(p+"mlp.shared_experts.", H, c.MoEIntermediateSize*c.NumSharedExperts)
		}
	} else {
		y.dense = ld.mlp(p+"mlp.", H, c.IntermediateSize)
	}
	return y
}
