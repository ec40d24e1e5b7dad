package plan

import (
	"fmt"
	"slices"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/internal/bytesize"
)

// Constants of the engine that the buffer lines count. engine/model and
// engine/generate define them, and their tests check that they agree
// (their TestEngineConstants).
const (
	// ExpertBlockRows is the rows an expert worker applies an MLP to at
	// once (model.ExpertBlockRows).
	ExpertBlockRows = 64
	// MTPPendingRows is the hidden states a sequence keeps for its MTP
	// layer (generate.MaxPendingMTP).
	MTPPendingRows = 64
)

// Shape is what the buffer lines are sized for: one forward of Rows rows
// (a Chunk-token prompt chunk and decode rows) returning LogitRows rows of
// logits, Threads worker goroutines, and the decoders of Sequences
// sequences of Context tokens.
type Shape struct {
	Config    *config.Config
	DSA, MTP  bool
	Context   int
	Sequences int
	Chunk     int
	Rows      int
	LogitRows int
	Threads   int
	// GPU is the device prefill chunks run on, or nil.
	GPU *GPUDevice
}

// shape is the plan's Shape for a prefill chunk of chunk tokens: the chunk
// and a decode row of every other sequence (a lone speculative sequence
// forwards two rows); logits of a row per sequence (two for the lone one).
func (p *Plan) shape(cfg *config.Config, w Weights, chunk int, dev *GPUDevice) Shape {
	return Shape{
		Config: cfg, DSA: w.DSA, MTP: w.MTP, GPU: dev,
		Context: p.Context, Sequences: p.Sequences, Chunk: chunk,
		Rows:      max(chunk+p.Sequences-1, 2),
		LogitRows: max(p.Sequences, 2),
		Threads:   p.Threads,
	}
}

// BufferItems are the lines that grow with a forward's rows, the context,
// the vocabulary, the experts or the threads, each a function of the
// shape: a new buffer line is one more call here.
func BufferItems(s Shape) []Item {
	return slices.Concat(activationItems(s), logitItems(s), workerItems(s), attentionItems(s), decoderItems(s), gpuBufferItems(s))
}

func total(items []Item) int64 {
	var n int64
	for _, it := range items {
		n += it.Bytes
	}
	return n
}

// sizeBuffers chooses the prefill chunk and returns the buffer lines for
// it. With chunk 0 it is the largest chunk (a multiple of
// ExpertBlockRows past it, at most the context) whose lines fit the
// activation budget: half of what the fixed lines and one cache slot per
// expert layer leave, at least the lines of a MinPrefillChunk chunk; and,
// with a discrete GPU, whose device lines fit its memory. The GPU plan
// follows the chunk (Plan.GPU).
func (p *Plan) sizeBuffers(cfg *config.Config, w Weights, chunk int, dev *GPUDevice, fixed int64) []Item {
	if chunk == 0 {
		least := min(MinPrefillChunk, p.Context)
		floor := total(BufferItems(p.shape(cfg, w, least, dev)))
		p.ActivationBudgetBytes = max(floor, (p.MemoryLimitBytes-fixed-p.SlotSetBytes)/2)
		lo, hi := least, p.Context
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if s := p.shape(cfg, w, mid, dev); total(BufferItems(s)) <= p.ActivationBudgetBytes && gpuFitsDevice(cfg, w, s) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		chunk = lo
		if chunk > least && chunk > ExpertBlockRows {
			chunk = max(least, chunk/ExpertBlockRows*ExpertBlockRows)
		}
	}
	s := p.shape(cfg, w, chunk, dev)
	p.PrefillChunk, p.BatchRows, p.LogitRows = chunk, s.Rows, s.LogitRows
	if dev != nil {
		p.GPU = gpuPlan(cfg, w, s)
	}
	items := BufferItems(s)
	if p.ActivationBudgetBytes == 0 {
		p.ActivationBudgetBytes = total(items)
	}
	return items
}

// Sizes of the Go values the lines count.
const (
	f32Bytes    = 4
	intBytes    = 8
	sliceHeader = 24
	rowBytes    = 32 // the model's per-row state: sequence, position, cache index, token
)

// activationItems is the runner's row buffers: per row the residual
// stream, the normed input, the final norm and the MLP output (4 x
// hidden), the per-(row, slot) expert outputs (experts_per_tok x hidden),
// the router scores (experts), the MTP layer's input (2 x hidden) and
// output rows, the chosen experts and weights, and the row's state; plus
// the per-expert bookkeeping of one forward.
func activationItems(s Shape) []Item {
	c := s.Config
	H, E, k := int64(c.HiddenSize), int64(c.NumRoutedExperts), int64(c.ExpertsPerToken)
	floats := 4*H + k*H + E
	headers := int64(sliceHeader) // the output rows
	if s.MTP {
		floats += 2 * H
		headers += sliceHeader // the MTP layer's output rows
	}
	perRow := f32Bytes*floats + k*(intBytes+2*f32Bytes) + rowBytes + headers
	perForward := 4*(E+1) + 4*E + intBytes*E + 2*f32Bytes*E + E + intBytes*k + 2*f32Bytes*H
	return []Item{{ItemActivations, int64(s.Rows)*perRow + perForward,
		fmt.Sprintf("%d rows x %s: a %d-token prompt chunk and a decode row per other sequence; per row the residual stream, normed input, final norm and MLP output (4 x hidden %d), expert outputs (experts_per_tok %d x hidden), router scores (%d experts)%s, routes",
			s.Rows, bytesize.IEC(perRow), s.Chunk, H, k, E, mtpInput(s))}}
}

func mtpInput(s Shape) string {
	if s.MTP {
		return ", the MTP input (2 x hidden)"
	}
	return ""
}

// logitItems is the logits one forward returns.
func logitItems(s Shape) []Item {
	V := int64(s.Config.VocabSize)
	return []Item{{ItemLogits, int64(s.LogitRows) * (f32Bytes*V + sliceHeader),
		fmt.Sprintf("%d rows x %d vocabulary x float32: the last row of a prompt chunk and every decode or draft-verify row", s.LogitRows, V)}}
}

// workerItems is each expert worker's buffers for a block of rows: input
// and output rows, gate and up products of the widest MLP.
func workerItems(s Shape) []Item {
	c := s.Config
	H := int64(c.HiddenSize)
	I := int64(max(c.IntermediateSize, c.MoEIntermediateSize*max(1, c.NumSharedExperts)))
	per := int64(ExpertBlockRows) * f32Bytes * (2*H + 2*I)
	return []Item{{ItemWorkers, int64(s.Threads) * per,
		fmt.Sprintf("%d workers x %s: a %d-row block's input, output, gate and up (widest MLP %d) each", s.Threads, bytesize.IEC(per), ExpertBlockRows, I)}}
}

// decoderItems is every sequence's decode state: the sampler's order and
// probabilities over the vocabulary, the constraint mask, the penalties'
// counts, the MTP layer's pending hidden states, and the generated tokens
// with their logprobs (a stream a slow reader has not drained).
func decoderItems(s Shape) []Item {
	c := s.Config
	V, H, T := int64(c.VocabSize), int64(c.HiddenSize), int64(s.Context)
	per := V*(intBytes+8) + (V+63)/64*8 + min(V, T)*48 + T*(intBytes+40+20*16)
	if s.MTP {
		per += MTPPendingRows*(f32Bytes*H+sliceHeader+intBytes) + draftgate.StateBytes
	}
	return []Item{{ItemDecoders, int64(s.Sequences) * per,
		fmt.Sprintf("%d sequence(s) x %s: sampler order and probabilities (vocabulary %d), constraint mask, penalty counts, %d pending MTP states and a drafting gate, and up to %d generated tokens with logprobs", s.Sequences, bytesize.IEC(per), V, MTPPendingRows, T)}}
}
