package model

import (
	"math"

	"github.com/spoolhq/spool/kernels"
)

// The DSA lightning indexer of a full layer (glm52-math.md 3.4): a row at
// position t scores every causal key s with
// I(t,s) = Σ_j w_j(t) ReLU(qI_j(t)·kI(s) / sqrt(d_I)) and, when it has
// more than index_topk keys, attends only to the index_topk best (score
// descending, position ascending on ties).

// indexerRows are a full layer's indexer projections of a forward's rows
// (scratch buffers): the keys kI = RoPE(LayerNorm(wk x)), and when the
// indexer scores (some row has more than index_topk keys, or a trace
// records the scores) the queries qI = wq_b cq and the head weights
// weights x.
type indexerRows struct {
	keys, q, w []float32
	scores     bool
}

// indexerBuffers takes the indexer's projection buffers for rows from the
// scratch; trace says the scores are recorded.
func (r *Runner) indexerBuffers(y *layer, rows []row, trace bool) indexerRows {
	m := r.m
	c := m.cfg
	R, nI, dI := len(rows), c.IndexNHeads, c.IndexHeadDim
	ix := indexerRows{keys: m.scratch.get(R * dI), scores: trace}
	for _, r := range rows {
		ix.scores = ix.scores || r.pos+1 > c.IndexTopK
	}
	if ix.scores {
		ix.q, ix.w = m.scratch.get(R*nI*dI), m.scratch.get(R*nI)
	}
	return ix
}

func (ix *indexerRows) put(s *scratch) {
	s.put(ix.keys)
	if ix.q != nil {
		s.put(ix.q)
		s.put(ix.w)
	}
}

// indexerSelect runs the indexer of a full layer for a step's rows and
// fills in their selections (sel, the step's view of the forward's
// selection, which the layer emptied). The keys come from the layer cache,
// which already holds these rows and every earlier row of their
// sequences. Each row scores its keys tile by tile into a bounded top-k
// heap, so nothing grows with the context. With scores (a trace) it
// records every row's scores as well, rows that attend densely included.
func (r *Runner) indexerSelect(y *layer, ix indexerRows, rows []row, sel *selection, scores [][]float32) {
	for i, r := range rows {
		if scores != nil {
			scores[i] = make([]float32, r.pos+1)
		}
	}
	if ix.scores {
		r.indexerScore(y, ix, rows, sel, scores)
	}
}

// indexerScore computes the rows' indexer scores from their projections
// ix: into sel for the rows with more than index_topk keys, and into
// scores[i] for every row when scores is set.
func (r *Runner) indexerScore(y *layer, ix indexerRows, rows []row, sel *selection, scores [][]float32) {
	m := r.m
	c := m.cfg
	R, K := len(rows), c.IndexTopK
	nI, dI, dr := c.IndexNHeads, c.IndexHeadDim, c.QKRopeHeadDim
	qI, w := ix.q, ix.w
	wScale := float32(1 / math.Sqrt(float64(nI)))
	for i := range w {
		w[i] *= wScale
	}
	kScale := float32(1 / math.Sqrt(float64(dI)))

	tile := r.attn.layout.IndexerTile
	work := 0
	for _, r := range rows {
		work += (r.pos + 1) * nI * dI
	}
	parallelFor(len(r.attn.workers), R, work, func(wi, lo, hi int) {
		wk := &r.attn.workers[wi]
		for i := lo; i < hi; i++ {
			r := rows[i]
			n := r.pos + 1
			selects := n > K
			if !selects && scores == nil {
				continue
			}
			qi := qI[i*nI*dI : (i+1)*nI*dI]
			for hd := range nI {
				m.rope.apply(qi[hd*dI:hd*dI+dr], r.pos)
			}
			index := r.seq.Layer(y.index)
			wk.top.reset(K)
			for t0 := 0; t0 < n; t0 += tile {
				nt := min(tile, n-t0)
				dots := wk.dots[:nI*nt]
				kernels.DotRowsMultiThreads(dots, qi, nI, index.Index(t0, t0+nt, wk.idxTile), dI, 1)
				s := wk.idxScore[:nt]
				clear(s)
				for hd := range nI {
					// ReLU without a branch: a clipped head adds an exact 0.
					wh := w[i*nI+hd]
					for j, d := range dots[hd*nt : (hd+1)*nt] {
						s[j] += wh * max(d*kScale, 0)
					}
				}
				if scores != nil {
					copy(scores[i][t0:], s)
				}
				if selects {
					for j, v := range s {
						if !wk.top.rejects(v) {
							wk.top.push(v, int32(t0+j))
						}
					}
				}
			}
			if selects {
				sel.rows[i] = wk.top.positions(sel.slot(i))
			}
		}
	})
}

// recordDSA stores a full layer's selections and scores in the trace.
func recordDSA(tr *Trace, layer int, sel *selection, R int, scores [][]float32) {
	if tr.DSA == nil {
		tr.DSA = map[int][][]int{}
		tr.DSAScores = map[int][][]float32{}
	}
	var rows [][]int
	for i := range R {
		if keys := sel.row(i); keys != nil {
			if rows == nil {
				rows = make([][]int, R)
			}
			rows[i] = make([]int, len(keys))
			for j, k := range keys {
				rows[i][j] = int(k)
			}
		}
	}
	tr.DSA[layer] = rows
	tr.DSAScores[layer] = scores
}
