package kvcache

import (
	"fmt"
	"slices"
)

// A block is the state of the token range [from, to) of a sequence laid out
// as one flat buffer, so that it can be kept, written and restored whole:
// for each decoder layer in order its KV rows ([latent | rope] per token),
// then, on indexer layers, its indexer keys; then, when the block carries
// them, the MTP rows of positions [max(from-1, 0), to-1).
//
// The MTP rows lag the main rows by one position because MTP row p consumes
// token p+1: a block's MTP rows are exactly those its own tokens and the
// tokens before them determine. Rows are found by position (the MTP cache
// may start past 0; see mtp.go). A block's values are float32 whatever
// the sequence stores: a bfloat16 sequence's, widened exactly (and a
// block imported into one is rounded again, to the same values when it
// came from one).

// MainFloats is the number of float32 values one token's main-model state
// occupies in a block: every layer's KV row and indexer key.
func (g Geometry) MainFloats() int {
	n := g.Layers * (g.KVLora + g.Rope)
	for _, idx := range g.Indexer {
		if idx {
			n += g.IndexDim
		}
	}
	return n
}

// MTPFloats is the number of float32 values of one MTP row.
func (g Geometry) MTPFloats() int { return g.KVLora + g.Rope }

// BlockMTPRange is the MTP positions [lo, hi) a block of tokens [from, to)
// carries.
func BlockMTPRange(from, to int) (lo, hi int) { return max(from-1, 0), max(to-1, 0) }

// BlockFloats is the length of the block of tokens [from, to), with or
// without its MTP rows.
func (g Geometry) BlockFloats(from, to int, mtp bool) int {
	n := (to - from) * g.MainFloats()
	if mtp {
		lo, hi := BlockMTPRange(from, to)
		n += (hi - lo) * g.MTPFloats()
	}
	return n
}

// ExportBlock appends the block of tokens [from, to) to dst and returns the
// extended slice. With mtp the block carries the MTP rows of positions
// [max(from-1, 0), to-1), which the MTP cache must hold (HasMTPRows);
// without, the MTP cache is not read.
func (s *Sequence) ExportBlock(dst []float32, from, to int, mtp bool) ([]float32, error) {
	if from < 0 || to <= from || to > s.Len() {
		return dst, fmt.Errorf("kvcache: export of tokens [%d, %d) from a sequence of %d", from, to, s.Len())
	}
	g := s.geo
	for l := range s.layers {
		y := &s.layers[l]
		if y.n < to {
			return dst, fmt.Errorf("kvcache: export of tokens [%d, %d): layer %d holds %d rows", from, to, l, y.n)
		}
		dst = y.kv.export(dst, from, to)
		if g.indexer(l) {
			dst = y.index.export(dst, from, to)
		}
	}
	if mtp {
		if !g.MTP {
			return dst, fmt.Errorf("kvcache: export of MTP rows from a sequence without an MTP cache")
		}
		lo, hi := BlockMTPRange(from, to)
		if !s.HasMTPRows(lo, hi) {
			return dst, fmt.Errorf("kvcache: export of MTP rows [%d, %d): the MTP cache holds [%d, %d)", lo, hi, s.mtpFrom, s.MTPEnd())
		}
		dst = s.mtp.kv.export(dst, lo-s.mtpFrom, hi-s.mtpFrom)
	}
	return dst, nil
}

// ImportBlock appends the state a block holds beyond the sequence's current
// length. The block covers the tokens tokens, from position from on, and
// carries MTP rows when mtp is set. The sequence must already hold the
// block's tokens up to its own length (so from <= s.Len()); an empty
// sequence takes a first block, a sequence holding a prefix takes the rest
// of its block and the blocks after it, and a block the sequence holds
// whole changes nothing.
//
// MTP rows are appended when the block carries them, the sequence has an MTP
// cache, and that cache continues within the block's MTP range (it ends
// between max(from-1, 0) and the block's last MTP position); ImportBlock
// reports whether the MTP cache then holds every row from position 0 up to
// from+len(tokens)-2, that is, whether it is still aligned with the main
// cache after this block.
func (s *Sequence) ImportBlock(from int, tokens []int, block []float32, mtp bool) (mtpAligned bool, err error) {
	to := from + len(tokens)
	n := s.Len()
	if from < 0 || len(tokens) == 0 || n < from {
		return false, fmt.Errorf("kvcache: import of tokens [%d, %d) into a sequence of %d", from, to, n)
	}
	g := s.geo
	if want := g.BlockFloats(from, to, mtp); len(block) != want {
		return false, fmt.Errorf("kvcache: block of tokens [%d, %d) has %d values, want %d", from, to, len(block), want)
	}
	held := min(n, to)
	if !slices.Equal(s.tokens[from:held], tokens[:held-from]) {
		return false, fmt.Errorf("kvcache: import of tokens [%d, %d): the sequence holds other tokens there", from, to)
	}
	lo, hi := BlockMTPRange(from, to)
	aligned := func() bool { return s.HasMTPRows(0, hi) }
	if n >= to {
		return aligned(), nil
	}
	if to > s.limit {
		return false, &ContextError{Have: n, Add: to - n, Limit: s.limit}
	}
	for l := range s.layers {
		if s.layers[l].n != n {
			return false, fmt.Errorf("kvcache: import into a sequence whose layer %d holds %d rows of %d tokens", l, s.layers[l].n, n)
		}
	}
	W := g.KVLora + g.Rope
	k := to - from // tokens in the block
	off := 0
	for l := range s.layers {
		y := &s.layers[l]
		y.kv.add(block[off+(n-from)*W:off+k*W], s.limit)
		off += k * W
		if g.indexer(l) {
			y.index.add(block[off+(n-from)*g.IndexDim:off+k*g.IndexDim], s.limit)
			off += k * g.IndexDim
		}
		y.n = to
	}
	s.tokens = append(s.tokens, tokens[n-from:]...)
	if mtp && g.MTP {
		if m := s.MTPEnd(); m >= lo && m <= hi {
			s.mtp.kv.add(block[off+(m-lo)*W:off+(hi-lo)*W], s.limit)
			s.mtp.n = hi - s.mtpFrom
		}
	}
	return aligned(), nil
}

// indexer reports whether layer l stores indexer keys.
func (g Geometry) indexer(l int) bool { return l < len(g.Indexer) && g.Indexer[l] && g.IndexDim > 0 }
