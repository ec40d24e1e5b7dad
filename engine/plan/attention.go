package plan

import (
	"fmt"
	"math/bits"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/internal/bytesize"
)

// ItemAttention names the attention workspace line.
const ItemAttention = "attention workspace"

// Tiles of the attention kernels (engine/model). Attention walks the keys
// tile by tile with an online softmax, so its workspace is bounded by these
// and by the rows of a forward, never by the context.
const (
	// AttentionLatentTile is the keys the latent (absorbed) form scores at
	// once for every head of a row: decode, and DSA rows' selected keys.
	AttentionLatentTile = 64
	// AttentionExpandedTile is the keys the expanded form expands through
	// kv_b at once, per head, for the dense rows of a prefill step.
	AttentionExpandedTile = 64
	// AttentionIndexerTile is the keys the DSA indexer scores at once.
	AttentionIndexerTile = 256
	// AttentionMinSegment and AttentionMaxSegments split one latent row's
	// keys into segments that run in parallel and merge in order: at least
	// AttentionMinSegment keys each, at most AttentionMaxSegments of them.
	AttentionMinSegment  = 256
	AttentionMaxSegments = 16
	// AttentionLatentBatch is the most rows whose segments run in parallel
	// (decode and speculative verification); more rows run one per worker.
	AttentionLatentBatch = 4
)

// AttentionSizing is what sizes the attention workspace.
type AttentionSizing struct {
	// Rows is the most rows one step of a forward attends for
	// (engine/model's Limits.ScratchRows).
	Rows int
	// Context is the longest sequence.
	Context int
	// Threads is the number of attention workers.
	Threads int
	// DSA says the lightning indexer runs (top-k heaps, selection store).
	DSA bool
	// BF16 says the KV cache is bfloat16: the workers widen a tile of it
	// at a time for the expanded form and the indexer.
	BF16 bool
}

// AttentionLayout is the attention workspace of one model, buffer by
// buffer, in values; engine/model allocates exactly this at load.
type AttentionLayout struct {
	Threads int
	// Rows is the rows of a step, which the latent row list holds;
	// BlockRows the rows of one expanded-form block (a run of one
	// sequence, so at most the context).
	Rows, BlockRows int
	// Tiles: keys per tile of the latent, expanded and indexer kernels,
	// and the split of a latent row's keys into segments (at least
	// MinSegment keys each, at most MaxSegments of them). NewAttentionLayout
	// sets the Attention* defaults.
	LatentTile, ExpandedTile, IndexerTile, MinSegment, MaxSegments int
	// Indexer says the workers carry the indexer's tiles; TopK is
	// index_topk, and Selects says a row can have more keys than that, so
	// each worker carries a top-k heap (and each row of a forward a
	// selection: SegmentRowBytes).
	Indexer bool
	TopK    int
	Selects bool
	// BF16: the cache is bfloat16, and each worker carries a tile of
	// widened rows for the expanded form and one of indexer keys.
	BF16 bool

	Heads, Latent, Rope, Nope, V, IndexHeads, IndexDim int
}

// NewAttentionLayout lays out the workspace for cfg.
func NewAttentionLayout(cfg *config.Config, s AttentionSizing) AttentionLayout {
	rows, ctx, threads := max(s.Rows, 1), max(s.Context, 1), max(s.Threads, 1)
	l := AttentionLayout{
		Threads:    threads,
		Rows:       rows,
		BlockRows:  min(rows, ctx),
		LatentTile: AttentionLatentTile, ExpandedTile: AttentionExpandedTile, IndexerTile: AttentionIndexerTile,
		MinSegment: AttentionMinSegment, MaxSegments: AttentionMaxSegments,
		Heads: cfg.NumHeads, Latent: cfg.KVLoraRank, Rope: cfg.QKRopeHeadDim,
		Nope: cfg.QKNopeHeadDim, V: cfg.VHeadDim, BF16: s.BF16,
	}
	if s.DSA {
		l.Indexer = true
		l.IndexHeads, l.IndexDim, l.TopK = cfg.IndexNHeads, cfg.IndexHeadDim, cfg.IndexTopK
		l.Selects = ctx > cfg.IndexTopK
	}
	return l
}

// Bytes sizes of the parts of one latent-form partial state per head: the
// latent accumulator, the running max (float32) and sum (float64).
func (l AttentionLayout) partialBytes() int64 {
	return int64(l.Heads) * (4*int64(l.Latent) + 4 + 8)
}

// LatentWorkerBytes is one worker's latent-form buffers: the absorbed
// query of every head, a gathered key tile, the tile's scores, the
// weighted latents, and two partial states (a segment and the running
// merge).
func (l AttentionLayout) LatentWorkerBytes() int64 {
	w, nh, t := int64(l.Latent+l.Rope), int64(l.Heads), int64(l.LatentTile)
	return 4*(nh*w+t*w+nh*t+nh*int64(l.Latent)) + 2*l.partialBytes()
}

// ExpandedWorkerBytes is one worker's expanded-form buffers: a tile's
// latents (from a bfloat16 cache, its widened rows too), its expansion for
// one head, its keys and transposed values, and per block row the query,
// the tile's probabilities, their product with the values, the running
// max (float32) and sum (float64).
func (l AttentionLayout) ExpandedWorkerBytes() int64 {
	t, dq, hw := int64(l.ExpandedTile), int64(l.Nope+l.Rope), int64(l.Nope+l.V)
	perRow := 4*(dq+t+int64(l.V)+1) + 8
	n := 4*t*(int64(l.Latent)+hw+dq+int64(l.V)) + int64(l.BlockRows)*perRow
	if l.BF16 {
		n += 4 * t * int64(l.Latent+l.Rope)
	}
	return n
}

// IndexerWorkerBytes is one worker's indexer buffers: a tile's dot
// products for every indexer head and its scores (from a bfloat16 cache,
// its widened keys too), and the top-k heap (float32 score and int32
// position per entry).
func (l AttentionLayout) IndexerWorkerBytes() int64 {
	if !l.Indexer {
		return 0
	}
	t := int64(l.IndexerTile)
	n := 4 * (int64(l.IndexHeads)*t + t)
	if l.BF16 {
		n += 4 * t * int64(l.IndexDim)
	}
	if l.Selects {
		n += 8 * int64(l.TopK)
	}
	return n
}

// SharedBytes is what the workers share: the latent batch (absorbed
// queries and the partial state of every segment of up to
// AttentionLatentBatch rows) and the latent row list (int32 per row).
func (l AttentionLayout) SharedBytes() int64 {
	b := int64(AttentionLatentBatch)
	return 4*b*int64(l.Heads)*int64(l.Latent+l.Rope) + b*int64(l.MaxSegments)*l.partialBytes() + 4*int64(l.Rows)
}

// Bytes is the whole workspace.
func (l AttentionLayout) Bytes() int64 {
	return int64(l.Threads)*(l.LatentWorkerBytes()+l.ExpandedWorkerBytes()+l.IndexerWorkerBytes()) + l.SharedBytes()
}

// AttentionWorkspace is the plan line of the attention workspace, sized
// once at load: per worker the kernels' tiles, partial sums and top-k
// heap, and shared the decode batch and the DSA selection of a forward's
// rows. It grows with rows and threads, not with the context.
func AttentionWorkspace(cfg *config.Config, s AttentionSizing) Item {
	l := NewAttentionLayout(cfg, s)
	d := fmt.Sprintf("%d workers x (latent %s + expanded %s", l.Threads, bytesize.IEC(l.LatentWorkerBytes()), bytesize.IEC(l.ExpandedWorkerBytes()))
	if l.Indexer {
		d += fmt.Sprintf(" + indexer %s", bytesize.IEC(l.IndexerWorkerBytes()))
	}
	d += fmt.Sprintf(") + shared %s: key tiles of %d/%d keys, %d-row expanded blocks, up to %d segments per decode row",
		bytesize.IEC(l.SharedBytes()), l.LatentTile, l.ExpandedTile, l.BlockRows, l.MaxSegments)
	if l.Selects {
		d += fmt.Sprintf(", top-%d heaps", l.TopK)
	}
	return Item{Name: ItemAttention, Bytes: l.Bytes(), Detail: d}
}

// ItemAttentionProjections names the line of attention's per-row
// projections.
const ItemAttentionProjections = "attention projections"

// attentionItems are attention's lines for a forward of shape s: the
// workspace its kernels use (AttentionWorkspace) and the projections of
// the rows of one step (ScratchRows), which come from engine/model's
// scratch in power-of-two size classes: the compressed query (q_lora), the
// queries of every head, the [latent | rope] row, the heads' outputs and
// o_proj's output, and with DSA the indexer's keys, queries and head
// weights.
func attentionItems(s Shape) []Item {
	c := s.Config
	R := int64(s.ScratchRows)
	nh, dq, dv := int64(c.NumHeads), int64(c.QKNopeHeadDim+c.QKRopeHeadDim), int64(c.VHeadDim)
	W, H := int64(c.KVLoraRank+c.QKRopeHeadDim), int64(c.HiddenSize)
	floats := pow2(R*int64(c.QLoraRank)) + pow2(R*nh*dq) + pow2(R*W) + pow2(R*nh*dv) + pow2(R*H)
	dsa := ""
	if s.DSA {
		nI, dI := int64(c.IndexNHeads), int64(c.IndexHeadDim)
		floats += pow2(R*dI) + pow2(R*nI*dI) + pow2(R*nI)
		dsa = ", the indexer's keys, queries and head weights"
	}
	ws := AttentionWorkspace(c, AttentionSizing{Rows: s.ScratchRows, Context: s.Context, Threads: s.Threads, DSA: s.DSA, BF16: s.KVBF16})
	return []Item{ws, {ItemAttentionProjections, f32Bytes * floats,
		fmt.Sprintf("%d rows of a step: queries (q_lora %d, %d heads x %d), the [latent | rope] row (%d), the heads' outputs and o_proj%s, each rounded to a power of two", s.ScratchRows, c.QLoraRank, nh, dq, W, dsa)}}
}

// pow2 is n rounded up to a power of two.
func pow2(n int64) int64 {
	if n <= 1 {
		return n
	}
	return 1 << bits.Len64(uint64(n-1))
}
