package model

import (
	"fmt"
	"runtime"

	"github.com/spoolhq/spool/engine/experts"
)

// Limits bound what one forward (Forward or MTPForward) may carry. The
// memory plan sizes them (engine/plan: the activations, logits and expert
// worker lines) and the model allocates its buffers for them once, at load.
// With Rows 0 the buffers are unplanned: they grow to the largest forward
// seen (tests and tools that have no plan).
type Limits struct {
	// Rows is the most rows of one forward: a prefill chunk plus the
	// decode rows batched with it. A forward of more is refused.
	Rows int
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

// Runner runs forwards of one model in buffers of its own (its workspace):
// one forward at a time, whose outputs are views of those buffers, valid
// until its next forward. The scheduler and each generation own one; the
// model's Limits size it.
type Runner struct {
	m       *Model
	ws      *workspace
	attn    *attnWorkspace
	touched ExpertSet // experts acquired by the latest forward
	// last is what the latest forward's leases read from storage, total
	// what all of the runner's did.
	last, total experts.Cost
}

// NewRunner returns a runner with buffers for the model's Limits.
func (m *Model) NewRunner() *Runner {
	c := m.cfg
	r := &Runner{m: m, ws: newWorkspace(c.HiddenSize, c.VocabSize, c.NumRoutedExperts, c.ExpertsPerToken, WidestMLP(c), m.mtp != nil, m.limits), attn: newAttnWorkspace(m.attnLayout)}
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

// workspace holds every buffer of a forward whose size grows with its rows,
// the vocabulary or the experts: the residual stream, the MLP outputs, the
// MTP input, the logits, the router's choices and the per-(row, slot)
// expert outputs, and one set of MLP buffers per expert worker. Attention
// keeps its own (attnWorkspace, and Model.scratch for its projections). Outputs of a forward are views of it,
// valid until the next forward.
type workspace struct {
	planned bool
	mtp     bool // the model has an MTP layer (mtpRows)
	rows    int  // rows the buffers hold
	logits  int  // logit rows the buffers hold

	h, x, hn, ffn []float32 // [rows × hidden]
	cat           []float32 // [rows × 2 hidden]: the MTP layer's input
	emb           []float32 // [hidden]
	logit         []float32 // [logits × vocab]
	hiddenRows    [][]float32
	mtpRows       [][]float32 // the MTP layer's output rows (hiddenRows stay the main forward's)
	logitRows     [][]float32
	rowState      []row

	routerLogits []float32 // [rows × experts]
	routeIDs     []int     // [rows × experts_per_tok]: chosen experts, selection order
	routeWeights []float32 // [rows × experts_per_tok]
	expertOut    []float32 // [rows × experts_per_tok × hidden]
	users        []int32   // [rows × experts_per_tok]: row*k+slot, grouped by expert
	usersStart   []int32   // [experts + 1]
	usersNext    []int32   // [experts]
	union        []int     // [experts]
	score        []float32 // [experts]
	choice       []float32 // [experts]
	taken        []bool    // [experts]
	order        []int     // [experts_per_tok]
	acc          []float32 // [hidden]

	workers []*mlpBuffers

	// Dimensions.
	hidden, vocab, experts, perTok int
}

// mlpBuffers are one expert worker's buffers for a block of rows.
type mlpBuffers struct {
	xs, ys []float32 // [block × hidden]
	g, u   []float32 // [block × widest intermediate]
}

// newWorkspace sizes the buffers for lim; unplanned limits start empty.
func newWorkspace(hidden, vocab, experts, perTok, inter int, mtp bool, lim Limits) *workspace {
	w := &workspace{hidden: hidden, vocab: vocab, experts: experts, perTok: perTok, mtp: mtp}
	w.usersStart = make([]int32, experts+1)
	w.usersNext = make([]int32, experts)
	w.union = make([]int, 0, experts)
	w.score = make([]float32, experts)
	w.choice = make([]float32, experts)
	w.taken = make([]bool, experts)
	w.order = make([]int, perTok)
	w.acc = make([]float32, hidden)
	w.emb = make([]float32, hidden)
	workers := lim.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	for range workers {
		w.workers = append(w.workers, &mlpBuffers{
			xs: make([]float32, ExpertBlockRows*hidden),
			ys: make([]float32, ExpertBlockRows*hidden),
			g:  make([]float32, ExpertBlockRows*inter),
			u:  make([]float32, ExpertBlockRows*inter),
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
		return fmt.Errorf("model: a forward of %d rows with %d logit rows exceeds the planned %d rows and %d logit rows (the memory plan's activations and logits lines)", rows, logits, w.rows, w.logits)
	}
	w.grow(max(rows, w.rows), max(logits, w.logits))
	return nil
}

func (w *workspace) grow(rows, logits int) {
	H, k := w.hidden, w.perTok
	if rows > w.rows {
		w.rows = rows
		w.h = make([]float32, rows*H)
		w.x = make([]float32, rows*H)
		w.hn = make([]float32, rows*H)
		w.ffn = make([]float32, rows*H)
		w.cat = make([]float32, rows*2*H)
		w.hiddenRows = make([][]float32, rows)
		if w.mtp {
			w.mtpRows = make([][]float32, rows)
		}
		w.rowState = make([]row, rows)
		w.routerLogits = make([]float32, rows*w.experts)
		w.routeIDs = make([]int, rows*k)
		w.routeWeights = make([]float32, rows*k)
		w.expertOut = make([]float32, rows*k*H)
		w.users = make([]int32, rows*k)
	}
	if logits > w.logits {
		w.logits = logits
		w.logit = make([]float32, logits*w.vocab)
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
// activations, logits and expert workers lines count it).
func (r *Runner) BufferBytes() int64 {
	w := r.ws
	n := 4 * int64(cap(w.h)+cap(w.x)+cap(w.hn)+cap(w.ffn)+cap(w.cat)+cap(w.emb)+cap(w.logit)+cap(w.routerLogits)+cap(w.routeWeights)+cap(w.expertOut)+cap(w.score)+cap(w.choice)+cap(w.acc))
	n += 24 * int64(cap(w.hiddenRows)+cap(w.mtpRows)+cap(w.logitRows))
	n += 32 * int64(cap(w.rowState))
	n += 8 * int64(cap(w.routeIDs)+cap(w.union)+cap(w.order))
	n += 4 * int64(cap(w.users)+cap(w.usersStart)+cap(w.usersNext))
	n += int64(cap(w.taken))
	for _, b := range w.workers {
		n += 4 * int64(cap(b.xs)+cap(b.ys)+cap(b.g)+cap(b.u))
	}
	return n
}
