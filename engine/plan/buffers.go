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
	// ArrivalRows is the most rows of a forward whose routed experts'
	// (row, slot) outputs are kept until all have arrived
	// (model.ArrivalRows).
	ArrivalRows = 16
	// PrefillScratchRows is the most rows a layer's steps work on at once
	// (model.DefaultScratchRows): the prefill scratch line's rows.
	PrefillScratchRows = 512
	// MTPPendingRows is the hidden states a sequence keeps for its MTP
	// layer (generate.MaxPendingMTP).
	MTPPendingRows = 64
)

// Shape is what the buffer lines are sized for: one forward of Rows rows
// (a Segment-token prompt segment and decode rows) returning LogitRows
// rows of logits, whose layers' steps take ScratchRows rows at a time,
// Threads worker goroutines, and the decoders of Sequences sequences of
// Context tokens.
type Shape struct {
	Config   *config.Config
	DSA, MTP bool
	// KVBF16: the KV cache is bfloat16 (attention widens it a tile at a
	// time).
	KVBF16      bool
	Context     int
	Sequences   int
	Segment     int
	Rows        int
	ScratchRows int
	LogitRows   int
	Threads     int
	// GPU is the device prefill segments run on, or nil.
	GPU *GPUDevice
}

// shape is the plan's Shape for a prefill segment of segment tokens: the
// segment and a decode row of every other sequence (a lone speculative
// sequence forwards two rows); logits of a row per sequence (two for the
// lone one); steps of PrefillScratchRows rows, or of the whole forward
// when it is smaller.
func (p *Plan) shape(cfg *config.Config, w Weights, segment int, dev *GPUDevice) Shape {
	rows := max(segment+p.Sequences-1, 2)
	return Shape{
		Config: cfg, DSA: w.DSA, MTP: w.MTP, KVBF16: p.KVBF16(), GPU: dev,
		Context: p.Context, Sequences: p.Sequences, Segment: segment,
		Rows:        rows,
		ScratchRows: min(PrefillScratchRows, rows),
		LogitRows:   max(p.Sequences, 2),
		Threads:     p.Threads,
	}
}

// BufferItems are the lines that grow with a forward's rows, the context,
// the vocabulary, the experts or the threads, each a function of the
// shape: a new buffer line is one more call here.
func BufferItems(s Shape) []Item {
	return slices.Concat(segmentItems(s), scratchItems(s), logitItems(s), workerItems(s), attentionItems(s), decoderItems(s), gpuBufferItems(s))
}

func total(items []Item) int64 {
	var n int64
	for _, it := range items {
		n += it.Bytes
	}
	return n
}

// CacheFloorShare: before a prefill segment grows past the shortest, the
// expert cache keeps one slot per CacheFloorShare experts of a layer (at
// least one; GLM-5.2: 3 of 256). A segment then takes half of what the
// lines leave beyond that floor, up to the whole context, and the expert
// cache the rest (New then gives the segment what the cache cannot turn
// into a whole slot). A prompt longer than the segment reads every
// routed expert it routes to once per segment (a minute or so of
// GLM-5.2's SSD reads on a Mac each time), while each cache slot costs
// reads on every decoded token; a segment of GLM-5.2 costs about 72 KiB a
// token.
const CacheFloorShare = 100

// cacheFloorSlots is the expert cache's floor, in slots per layer.
func (p *Plan) cacheFloorSlots() int64 {
	return int64(max(1, (p.ExpertsPerLayer+CacheFloorShare-1)/CacheFloorShare))
}

// sizeBuffers chooses the prefill segment and returns the buffer lines for
// it. With segment 0 it is the longest segment (at most the context) whose
// lines fit the prefill budget: the lines of a MinPrefillSegment segment
// plus half of what the fixed lines, those lines and the expert cache's
// floor (CacheFloorShare) leave; and, with a discrete GPU, whose device
// lines fit its memory. The GPU plan follows the segment (Plan.GPU).
func (p *Plan) sizeBuffers(cfg *config.Config, w Weights, segment int, dev *GPUDevice, fixed int64) []Item {
	if segment == 0 {
		least := min(MinPrefillSegment, p.Context)
		floor := total(BufferItems(p.shape(cfg, w, least, dev)))
		p.PrefillBudgetBytes = floor + max(0, p.MemoryLimitBytes-fixed-floor-p.cacheFloorSlots()*p.SlotSetBytes)/2
		lo, hi := least, p.Context
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if s := p.shape(cfg, w, mid, dev); total(BufferItems(s)) <= p.PrefillBudgetBytes && gpuFitsDevice(cfg, w, s) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		segment = lo
	}
	s := p.shape(cfg, w, segment, dev)
	p.PrefillSegment, p.BatchRows, p.ScratchRows, p.LogitRows = segment, s.Rows, s.ScratchRows, s.LogitRows
	if dev != nil {
		p.GPU = gpuPlan(cfg, w, s)
	}
	items := BufferItems(s)
	if p.PrefillBudgetBytes == 0 {
		p.PrefillBudgetBytes = total(items)
	}
	return items
}

// Sizes of the Go values the lines count.
const (
	f32Bytes    = 4
	intBytes    = 8
	ptrBytes    = 8
	sliceHeader = 24
	rowBytes    = 32 // the model's per-row state: sequence, position, cache index, token
)

// SegmentRowBytes is what one row of a forward keeps from layer to layer:
// its residual stream and the MoE layer's running sum of its experts (2 x
// hidden), the MTP layer's residual stream (hidden), its routes (chosen
// experts and weights, and its place in the per-expert row lists), its
// state and output row header, and with DSA the selection of index_topk
// keys that shared layers reuse.
func SegmentRowBytes(s Shape) int64 {
	c := s.Config
	H, k := int64(c.HiddenSize), int64(c.ExpertsPerToken)
	n := f32Bytes*2*H + k*(intBytes+2*f32Bytes) + rowBytes + sliceHeader
	if s.MTP {
		n += f32Bytes*H + sliceHeader
	}
	if selects(s) {
		n += f32Bytes*int64(c.IndexTopK) + sliceHeader
	}
	return n
}

// selects says rows of s can have DSA selections.
func selects(s Shape) bool { return s.DSA && s.Context > s.Config.IndexTopK }

// segmentItems is the runner's per-row state: SegmentRowBytes for every
// row of a forward.
func segmentItems(s Shape) []Item {
	c := s.Config
	per := SegmentRowBytes(s)
	d := fmt.Sprintf("%d rows x %s: a %d-token prompt segment and a decode row per other sequence, kept from layer to layer; per row the residual stream and the routed experts' sum (2 x hidden %d)", s.Rows, bytesize.IEC(per), s.Segment, c.HiddenSize)
	if s.MTP {
		d += ", the MTP layer's residual stream"
	}
	d += ", routes"
	if selects(s) {
		d += fmt.Sprintf(", the DSA selection (index_topk %d keys)", c.IndexTopK)
	}
	return []Item{{ItemSegment, int64(s.Rows) * per, d}}
}

// scratchItems is what a layer's steps work on, bounded by ScratchRows
// rather than the segment: per scratch row the normed input and the dense
// or shared MLP's output (2 x hidden), the MTP layer's input (2 x hidden)
// and the router's scores (experts); the (row, slot) expert outputs of
// ArrivalRows rows; and the per-expert bookkeeping of one forward.
func scratchItems(s Shape) []Item {
	c := s.Config
	H, E, k := int64(c.HiddenSize), int64(c.NumRoutedExperts), int64(c.ExpertsPerToken)
	floats := 2*H + E
	if s.MTP {
		floats += 2 * H
	}
	perRow := f32Bytes * floats
	arrival := int64(ArrivalRows) * k * H * f32Bytes
	perForward := f32Bytes*(2*H+2*E) + intBytes*(E+k) + ptrBytes*E + 4*(2*E+1) + E
	return []Item{{ItemScratch, int64(s.ScratchRows)*perRow + arrival + perForward,
		fmt.Sprintf("%d rows x %s: the rows a layer's steps work on at once (normed input, MLP output, router scores%s), the (row, slot) expert outputs of %d decode rows (%s), per-expert bookkeeping",
			s.ScratchRows, bytesize.IEC(perRow), mtpInput(s), ArrivalRows, bytesize.IEC(arrival))}}
}

func mtpInput(s Shape) string {
	if s.MTP {
		return ", the MTP input"
	}
	return ""
}

// logitItems is the logits one forward returns.
func logitItems(s Shape) []Item {
	V := int64(s.Config.VocabSize)
	return []Item{{ItemLogits, int64(s.LogitRows) * (f32Bytes*V + sliceHeader),
		fmt.Sprintf("%d rows x %d vocabulary x float32: the last row of a prompt segment and every decode or draft-verify row", s.LogitRows, V)}}
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
