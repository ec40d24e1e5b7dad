package model

import (
	"fmt"
	"runtime"

	"github.com/spoolhq/spool/engine/experts"
)

// Limits bound what one forward (Forward or MTPForward) may carry. The
// memory plan sizes them (engine/plan: the prefill segment, prefill
// scratch, logits and expert worker lines) and the model allocates its
// buffers for them once, at load. With Rows 0 the buffers are unplanned:
// the per-row state grows to the largest forward seen (tests and tools
// that have no plan).
type Limits struct {
	// Rows is the most rows of one forward: a prompt segment plus the
	// decode rows batched with it. What a row keeps from layer to layer
	// (its residual stream, the MoE layer's sum of its experts, its routes)
	// is sized for it. A forward of more is refused.
	Rows int
	// ScratchRows is the most rows a layer's steps work on at once: a
	// forward goes through each layer ScratchRows rows at a time (the
	// normed input, attention's projections, the router's scores and the
	// dense and shared MLPs' outputs are sized for them), except for the
	// routed experts, which each layer applies to every row of the forward
	// at once so that each is read once per forward. Default
	// DefaultScratchRows.
	ScratchRows int
	// LogitRows is the most rows whose logits one forward returns
	// (default Rows).
	LogitRows int
	// Workers is the goroutines that apply routed experts and attend, each
	// with its own buffers (default GOMAXPROCS).
	Workers int
	// Context is the longest sequence attention is sized for (default
	// max_position_embeddings).
	Context int
}

// DefaultScratchRows is the default Limits.ScratchRows (plan.PrefillScratchRows).
const DefaultScratchRows = 512

// scratchRows is the rows a step works on at once under o.
func (o Limits) scratchRows() int {
	s := o.ScratchRows
	if s <= 0 {
		s = DefaultScratchRows
	}
	if o.Rows > 0 {
		s = min(s, o.Rows)
	}
	return s
}

// Runner runs forwards of one model in buffers of its own (its workspace):
// one forward at a time, whose outputs are views of those buffers, valid
// until its next forward. The scheduler and each generation own one; the
// model's Limits size it.
type Runner struct {
	m       *Model
	ws      *workspace
	attn    *attnWorkspace
	touched ExpertSet // experts acquired by the latest forward
	// arrival is the most rows whose experts are applied as they arrive
	// (ArrivalRows; tests lower it to compare the two ways).
	arrival int
	// last is what the latest forward's leases read from storage, total
	// what all of the runner's did.
	last, total experts.Cost
}

// NewRunner returns a runner with buffers for the model's Limits.
func (m *Model) NewRunner() *Runner {
	c := m.cfg
	shape := workspaceShape{
		hidden: c.HiddenSize, vocab: c.VocabSize, experts: c.NumRoutedExperts, perTok: c.ExpertsPerToken,
		inter: WidestMLP(c), mtp: m.mtp != nil, topK: c.IndexTopK, selects: m.attnLayout.Selects,
	}
	r := &Runner{m: m, ws: newWorkspace(shape, m.limits), attn: newAttnWorkspace(m.attnLayout), arrival: ArrivalRows}
	r.touched.bits = make([]uint64, (len(ExpertLayers(c, m.mtp != nil))*c.NumRoutedExperts+63)/64)
	return r
}

// Model is the model the runner runs.
func (r *Runner) Model() *Model { return r.m }

// ExpertBlockRows is the most rows an MLP (a routed expert, the shared
// expert or a dense layer's MLP) is applied to at once: longer runs go
// block by block, so a worker's buffers do not grow with the prefill chunk.
// Rows of a matrix product do not depend on how many are computed together,
// so the block size does not change any result.
const ExpertBlockRows = 64

// ArrivalRows is the most rows of a forward whose routed experts are
// applied as the expert source delivers them, each (row, slot) output kept
// until all have arrived and then summed in ascending expert order (decode
// and speculative verification: the experts a miss waits for overlap the
// products of those already there). Larger forwards apply the experts in
// ascending order into each row's running sum, which needs no per-slot
// outputs: the same additions in the same order, so the same numbers.
const ArrivalRows = 16

// workspace holds every buffer of a forward whose size grows with its rows,
// the vocabulary or the experts.
//
// Per row of the forward (Limits.Rows), kept from layer to layer: the
// residual stream h (the final-normed hidden state once the forward is
// done: Output.Hidden), the MoE layer's sum of its routed experts acc, the
// MTP layer's residual stream, the row's routes, its state and the DSA
// selection that shared layers reuse. Per scratch row (Limits.ScratchRows),
// for the rows a step works on: the normed input, the dense or shared
// MLP's output, the MTP layer's input and the router's scores. The
// (row, slot) expert outputs of ArrivalRows rows, the logits, the
// per-forward bookkeeping over the experts, and one set of MLP buffers per
// expert worker. Attention keeps its own (attnWorkspace, and Model.scratch
// for its projections). Outputs of a forward are views of it, valid until
// the next forward.
type workspace struct {
	shape   workspaceShape
	planned bool
	rows    int // rows the per-row buffers hold
	logits  int // logit rows the buffers hold
	scratch int // rows the scratch buffers hold

	// Per row.
	h, acc       []float32 // [rows × hidden]
	mtpH         []float32 // [rows × hidden]: the MTP layer's residual stream
	hiddenRows   [][]float32
	mtpRows      [][]float32 // the MTP layer's output rows (hiddenRows stay the main forward's)
	rowState     []row
	routeIDs     []int     // [rows × experts_per_tok]: chosen experts, selection order
	routeWeights []float32 // [rows × experts_per_tok]
	users        []int32   // [rows × experts_per_tok]: row*k+slot, grouped by expert
	sel          selection // the DSA selection of the most recent full layer

	// Per scratch row.
	x, ffn       []float32 // [scratch × hidden]
	cat          []float32 // [scratch × 2 hidden]: the MTP layer's input
	routerLogits []float32 // [scratch × experts]

	expertOut []float32 // [ArrivalRows × experts_per_tok × hidden]
	logit     []float32 // [logits × vocab]
	logitRows [][]float32

	// Per forward.
	emb        []float32         // [hidden]
	usersStart []int32           // [experts + 1]
	usersNext  []int32           // [experts]
	union      []int             // [experts]
	score      []float32         // [experts]
	choice     []float32         // [experts]
	taken      []bool            // [experts]
	order      []int             // [experts_per_tok]
	sum        []float32         // [hidden]
	got        []*experts.Expert // the ascending path's experts delivered ahead of their turn

	workers []*mlpBuffers
}

// workspaceShape is what a workspace's buffers are sized by, besides the
// limits.
type workspaceShape struct {
	hidden, vocab, experts, perTok, inter int
	mtp                                   bool
	// topK is index_topk; selects says rows can have DSA selections (the
	// context is longer than topK), which the per-row state keeps.
	topK    int
	selects bool
}

// mlpBuffers are one expert worker's buffers for a block of rows.
type mlpBuffers struct {
	xs, ys []float32 // [block × hidden]
	g, u   []float32 // [block × widest intermediate]
}

// newWorkspace sizes the buffers for lim; unplanned limits start with no
// per-row buffers.
func newWorkspace(s workspaceShape, lim Limits) *workspace {
	H, E, k := s.hidden, s.experts, s.perTok
	w := &workspace{shape: s, scratch: lim.scratchRows()}
	S := w.scratch
	w.x = make([]float32, S*H)
	w.ffn = make([]float32, S*H)
	if s.mtp {
		w.cat = make([]float32, S*2*H)
	}
	w.routerLogits = make([]float32, S*E)
	w.expertOut = make([]float32, ArrivalRows*k*H)
	w.emb = make([]float32, H)
	w.usersStart = make([]int32, E+1)
	w.usersNext = make([]int32, E)
	w.union = make([]int, 0, E)
	w.score = make([]float32, E)
	w.choice = make([]float32, E)
	w.taken = make([]bool, E)
	w.order = make([]int, k)
	w.sum = make([]float32, H)
	w.got = make([]*experts.Expert, E)
	w.sel.k = s.topK
	workers := lim.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	for range workers {
		w.workers = append(w.workers, &mlpBuffers{
			xs: make([]float32, ExpertBlockRows*H),
			ys: make([]float32, ExpertBlockRows*H),
			g:  make([]float32, ExpertBlockRows*s.inter),
			u:  make([]float32, ExpertBlockRows*s.inter),
		})
	}
	if lim.Rows > 0 {
		w.planned = true
		logits := lim.LogitRows
		if logits <= 0 {
			logits = lim.Rows
		}
		w.grow(lim.Rows, logits)
	}
	return w
}

// reserve makes the buffers hold a forward of rows rows returning logits
// logit rows. A planned workspace refuses a larger forward.
func (w *workspace) reserve(rows, logits int) error {
	if rows <= w.rows && logits <= w.logits {
		return nil
	}
	if w.planned {
		return fmt.Errorf("model: a forward of %d rows with %d logit rows exceeds the planned %d rows and %d logit rows (the memory plan's prefill segment and logits lines)", rows, logits, w.rows, w.logits)
	}
	w.grow(max(rows, w.rows), max(logits, w.logits))
	return nil
}

func (w *workspace) grow(rows, logits int) {
	H, k := w.shape.hidden, w.shape.perTok
	if rows > w.rows {
		w.rows = rows
		w.h = make([]float32, rows*H)
		w.acc = make([]float32, rows*H)
		w.hiddenRows = make([][]float32, rows)
		if w.shape.mtp {
			w.mtpH = make([]float32, rows*H)
			w.mtpRows = make([][]float32, rows)
		}
		w.rowState = make([]row, rows)
		w.routeIDs = make([]int, rows*k)
		w.routeWeights = make([]float32, rows*k)
		w.users = make([]int32, rows*k)
		if w.shape.selects {
			w.sel.rows = make([][]int32, 0, rows)
			w.sel.store = make([]int32, rows*w.shape.topK)
		}
	}
	if logits > w.logits {
		w.logits = logits
		w.logit = make([]float32, logits*w.shape.vocab)
		w.logitRows = make([][]float32, logits)
	}
}

// split returns views of flat's rows of width values, using headers for the
// slice headers.
func split(headers [][]float32, flat []float32, width int) [][]float32 {
	out := headers[:len(flat)/width]
	for i := range out {
		out[i] = flat[i*width : (i+1)*width : (i+1)*width]
	}
	return out
}

// BufferBytes is the memory the runner's buffers hold (the memory plan's
// prefill segment, prefill scratch, logits and expert workers lines count
// it).
func (r *Runner) BufferBytes() int64 {
	w := r.ws
	n := 4 * int64(cap(w.h)+cap(w.acc)+cap(w.mtpH)+cap(w.x)+cap(w.ffn)+cap(w.cat)+cap(w.emb)+cap(w.logit)+cap(w.routerLogits)+cap(w.routeWeights)+cap(w.expertOut)+cap(w.score)+cap(w.choice)+cap(w.sum))
	n += 24 * int64(cap(w.hiddenRows)+cap(w.mtpRows)+cap(w.logitRows)+cap(w.sel.rows))
	n += 32 * int64(cap(w.rowState))
	n += 8 * int64(cap(w.routeIDs)+cap(w.union)+cap(w.order)+cap(w.got))
	n += 4 * int64(cap(w.users)+cap(w.usersStart)+cap(w.usersNext)+cap(w.sel.store))
	n += int64(cap(w.taken))
	for _, b := range w.workers {
		n += 4 * int64(cap(b.xs)+cap(b.ys)+cap(b.g)+cap(b.u))
	}
	return n
}
