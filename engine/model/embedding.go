package model

import (
	"fmt"
	"sync"

	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/kernels"
)

// embedding is the token embedding table: resident (the matrix Weights
// gave), or read by row on demand (Options.EmbeddingRows) into a small
// cache of quantized rows, since a token needs one row of it: GLM-5.2's
// int8 table is 0.95 GB, a row 6 KB. A row is dequantized on each use.
// Safe for concurrent use.
type embedding struct {
	table *kernels.Matrix // resident, or nil

	src      MatrixRows
	mu       sync.Mutex
	rowBytes int
	slab     []byte           // [slots × rowBytes]: the cached rows
	rows     []kernels.Matrix // slot → its row as a one-row matrix over slab (Rows 0: empty)
	tokenOf  []int32          // slot → token
	slotOf   []int32          // token → slot, -1 when not cached
	ref      []bool           // CLOCK reference bits
	hand     int
	reads    int64 // rows read from the weights
}

// newEmbedding reads the table's rows on demand from src into a cache of
// slots rows, for a vocabulary of vocab tokens.
func newEmbedding(src MatrixRows, slots, vocab int) *embedding {
	slots = min(slots, vocab)
	e := &embedding{
		src: src, rowBytes: src.RowBytes(),
		rows: make([]kernels.Matrix, slots), tokenOf: make([]int32, slots), slotOf: make([]int32, vocab), ref: make([]bool, slots),
	}
	e.slab = make([]byte, slots*e.rowBytes)
	for i := range e.slotOf {
		e.slotOf[i] = -1
	}
	for i := range e.tokenOf {
		e.tokenOf[i] = -1
	}
	return e
}

// row writes token's embedding into dst.
func (e *embedding) row(dst []float32, token int) error {
	if e.table != nil {
		kernels.DequantRow(dst, e.table, token)
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.slotOf[token]
	if s < 0 {
		s = int32(e.victim())
		if old := e.tokenOf[s]; old >= 0 {
			e.slotOf[old] = -1
		}
		e.tokenOf[s], e.rows[s] = -1, kernels.Matrix{}
		m, err := e.src.ReadRow(token, e.slab[int(s)*e.rowBytes:int(s+1)*e.rowBytes])
		if err != nil {
			return fmt.Errorf("model: embedding row %d: %w", token, err)
		}
		e.rows[s], e.tokenOf[s], e.slotOf[token] = *m, int32(token), s
		e.reads++
	}
	e.ref[s] = true
	kernels.DequantRow(dst, &e.rows[s], 0)
	return nil
}

// victim picks the slot a new row takes: an empty one, else the first
// the CLOCK hand finds not used since it last passed.
func (e *embedding) victim() int {
	for {
		s := e.hand
		e.hand = (e.hand + 1) % len(e.rows)
		if e.tokenOf[s] < 0 || !e.ref[s] {
			return s
		}
		e.ref[s] = false
	}
}

// bytes is the memory the embedding holds: the resident table, or the
// cache (plan.EmbeddingCacheBytes counts the same; a slot's bookkeeping,
// its matrix header, token and reference bit, within
// plan.EmbeddingSlotOverhead).
func (e *embedding) bytes() int64 {
	if e.table != nil {
		return int64(len(e.table.Data) + 4*len(e.table.Scales) + 4*len(e.table.F32))
	}
	return int64(len(e.slab)) + int64(len(e.rows))*plan.EmbeddingSlotOverhead + 4*int64(len(e.slotOf))
}

// EmbeddingBytes is the memory the model's embedding table takes: the
// whole table, or the cache of rows read on demand (the plan's embedding
// line).
func (m *Model) EmbeddingBytes() int64 { return m.embed.bytes() }

// EmbeddingReads is the rows of the embedding table read from the weights
// since Load (0 when the table is resident).
func (m *Model) EmbeddingReads() int64 {
	m.embed.mu.Lock()
	defer m.embed.mu.Unlock()
	return m.embed.reads
}
