package kvcache

// The MTP layer's cache lags the main one by a position.
//
// MTP row p consumes two inputs: the main model's final hidden state of
// position p, and the token at position p+1. So when the main cache holds
// positions [0, n), the MTP cache holds rows up to n-2 once their hidden
// states are absorbed, and row n-1 only once the token at n is known
// (sampled, or drafted) though not yet forwarded: MTPEnd <= n. The hidden
// states not absorbed yet wait outside the cache (engine/generate's queue)
// for the token after them.
//
// Rows are contiguous and found by position. They start at 0 unless the
// MTP layer started over past the start (ResetMTP: a restore without MTP
// state, a gap the decoder could not fill): rows that start past 0 are
// exact for their positions (a row depends only on its own inputs), but
// the MTP layer attends over fewer of them than a run from the start, so
// its drafts may differ; the main model's tokens never do. The prompt
// cache stores a block's MTP rows with its main rows, one position behind
// them (BlockMTPRange).
//
// Every operation that moves the main cache back keeps the lag: Trim and
// Rewind drop the MTP rows of the positions dropped, and the row that
// consumed a token that is no longer the one to come; Mark and Rollback
// undo an append of both caches.

// MTP returns the MTP layer's cache (its rows lag the main model's).
func (s *Sequence) MTP() *Layer { return &s.mtp }

// MTPEnd is the position after the MTP cache's last row: the position of
// the row the MTP layer appends next.
func (s *Sequence) MTPEnd() int { return s.mtpFrom + s.mtp.n }

// HasMTPRows reports whether the MTP cache holds the rows of every position
// in [lo, hi).
func (s *Sequence) HasMTPRows(lo, hi int) bool {
	return s.geo.MTP && lo >= s.mtpFrom && hi <= s.MTPEnd()
}

// ResetMTP empties the MTP cache; its next row is that of position from:
// the MTP layer starts over there.
func (s *Sequence) ResetMTP(from int) {
	s.mtp.trim(0)
	s.mtpFrom = max(from, 0)
}

// Trim drops every token from position n on (speculative rollback, the
// end of a generation), with the MTP rows of the positions dropped. Row
// n-1, which consumed the token at n, stays: it is valid while the token
// to come at n is the one it consumed (the caller knows; Rewind checks).
func (s *Sequence) Trim(n int) {
	if n < 0 {
		n = 0
	}
	if n < len(s.tokens) {
		s.tokens = s.tokens[:n]
	}
	for i := range s.layers {
		s.layers[i].trim(n)
	}
	if n < s.mtpFrom {
		s.ResetMTP(n)
	}
	s.mtp.trim(n - s.mtpFrom)
}

// Rewind keeps positions [0, n) for a sequence whose token at n is to be
// next (prefix reuse: the next prompt shares the first n tokens). The MTP
// row of position n-1 consumed the token the sequence held at n: it stays
// only when that token is next.
func (s *Sequence) Rewind(n, next int) {
	consumed := -1
	if n >= 0 && n < len(s.tokens) {
		consumed = s.tokens[n]
	}
	s.Trim(n)
	if consumed != next && s.MTPEnd() == n && s.mtp.n > 0 {
		s.TrimMTP(s.mtp.n - 1)
	}
}

// Clear drops every token and every MTP row.
func (s *Sequence) Clear() {
	s.Trim(0)
	s.ResetMTP(0)
}

// TrimMTP drops the MTP cache's rows from its n-th on: the MTP layer
// undoing rows it appended.
func (s *Sequence) TrimMTP(n int) {
	s.mtp.trim(n)
}

// Mark is a sequence's extent: its tokens and its MTP rows.
type Mark struct{ tokens, mtpRows int }

// Mark records the sequence's extent, for Rollback.
func (s *Sequence) Mark() Mark { return Mark{len(s.tokens), s.mtp.n} }

// Rollback undoes what was appended to both caches since m (a restore
// cancelled half-way).
func (s *Sequence) Rollback(m Mark) {
	s.Trim(m.tokens)
	s.TrimMTP(m.mtpRows)
}
