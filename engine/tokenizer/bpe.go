package tokenizer

import "math"

// bpeScratch is reused across the words of one Encode call.
type bpeScratch struct {
	text  []byte // the word in byte-level form
	ids   []int
	ranks []int32
	syms  []symbol
	queue []candidate
}

// heapMinLen is the word length (in symbols) from which bpeWord switches from
// rescanning the pair ranks after each merge (quadratic, but fast for short
// words) to a priority queue (n log n).
const heapMinLen = 48

// noMerge is the rank of a pair that has no merge.
const noMerge = int32(math.MaxInt32)

// bpeWord appends the ids of one pre-tokenized word (raw bytes, before the
// byte-level mapping) to ids.
//
// Merges apply like HF tokenizers' BPE: repeatedly the pair with the lowest
// merge rank, the leftmost one among equal ranks.
func (t *Tokenizer) bpeWord(ids []int, word []byte, sc *bpeScratch) []int {
	if len(word) == 0 {
		return ids
	}
	if t.ignoreMerges {
		// The byte-level alphabet is a bijection with bytes, so this finds the
		// one vocabulary entry that decodes to the word, if there is one.
		sc.text = appendByteLevel(sc.text[:0], word)
		if id, ok := t.vocab.getBytes(sc.text); ok {
			return append(ids, id)
		}
	}
	cache := t.cache != nil && len(word) >= 2 && len(word) <= cacheMaxWord
	if cache {
		if out, ok := t.cache.get(ids, word); ok {
			return out
		}
	}
	start := len(ids)
	ids = t.mergeWord(ids, word, sc)
	if cache {
		t.cache.put(word, ids[start:])
	}
	return ids
}

// mergeWord appends the ids of word after applying the merges.
func (t *Tokenizer) mergeWord(ids []int, word []byte, sc *bpeScratch) []int {
	// One symbol per byte-level character (that is, per byte). Characters
	// missing from the vocabulary become unk_token, or are dropped without one.
	syms := sc.ids[:0]
	unkOpen := false
	for _, b := range word {
		id := t.byteID[b]
		if id < 0 {
			if t.unkID < 0 || (unkOpen && t.fuseUnk) {
				continue
			}
			id = t.unkID
			unkOpen = true
		} else {
			unkOpen = false
		}
		syms = append(syms, id)
	}
	sc.ids = syms
	if len(syms) >= heapMinLen {
		return t.mergeHeap(ids, syms, sc)
	}
	return t.mergeScan(ids, syms, sc)
}

func (t *Tokenizer) pairRank(a, b int) (int32, int32) {
	if m, ok := t.merges.get(pairKey(a, b)); ok {
		return m.rank, m.newID
	}
	return noMerge, -1
}

// mergeScan merges by rescanning the ranks of adjacent pairs.
func (t *Tokenizer) mergeScan(ids []int, syms []int, sc *bpeScratch) []int {
	if len(syms) < 2 {
		return append(ids, syms...)
	}
	ranks := sc.ranks[:0]
	for i := 0; i+1 < len(syms); i++ {
		r, _ := t.pairRank(syms[i], syms[i+1])
		ranks = append(ranks, r)
	}
	for len(syms) > 1 {
		best := 0
		for i, r := range ranks {
			if r < ranks[best] {
				best = i
			}
		}
		if ranks[best] == noMerge {
			break
		}
		m, _ := t.merges.get(pairKey(syms[best], syms[best+1]))
		syms[best] = int(m.newID)
		syms = append(syms[:best+1], syms[best+2:]...)
		ranks = append(ranks[:best], ranks[best+1:]...)
		if best > 0 {
			ranks[best-1], _ = t.pairRank(syms[best-1], syms[best])
		}
		if best < len(ranks) {
			ranks[best], _ = t.pairRank(syms[best], syms[best+1])
		}
	}
	sc.ranks = ranks
	return append(ids, syms...)
}

type symbol struct {
	id         int
	prev, next int // neighbours in the word, -1 at the ends
	gone       bool
}

type candidate struct {
	rank  int32
	pos   int32
	newID int32
}

func (c candidate) less(d candidate) bool {
	return c.rank < d.rank || c.rank == d.rank && c.pos < d.pos
}

// mergeHeap merges with a priority queue of candidate pairs ordered by
// (rank, position), as HF tokenizers' Word::merge_all does.
func (t *Tokenizer) mergeHeap(ids []int, word []int, sc *bpeScratch) []int {
	syms := sc.syms[:0]
	for i, id := range word {
		syms = append(syms, symbol{id: id, prev: i - 1, next: i + 1})
	}
	syms[len(syms)-1].next = -1

	q := sc.queue[:0]
	for i := 0; i+1 < len(syms); i++ {
		if r, n := t.pairRank(syms[i].id, syms[i+1].id); r != noMerge {
			q = append(q, candidate{rank: r, pos: int32(i), newID: n})
		}
	}
	for i := len(q)/2 - 1; i >= 0; i-- {
		siftDown(q, i)
	}
	for len(q) > 0 {
		c := q[0]
		q[0] = q[len(q)-1]
		q = q[:len(q)-1]
		siftDown(q, 0)

		p := int(c.pos)
		left := &syms[p]
		if left.gone || left.next < 0 {
			continue
		}
		r := left.next
		// Skip stale candidates: the pair at p must still merge into newID.
		if _, n := t.pairRank(left.id, syms[r].id); n != c.newID {
			continue
		}
		left.id = int(c.newID)
		left.next = syms[r].next
		syms[r].gone = true
		if left.next >= 0 {
			syms[left.next].prev = p
		}
		if left.prev >= 0 {
			if rk, n := t.pairRank(syms[left.prev].id, left.id); rk != noMerge {
				q = push(q, candidate{rank: rk, pos: int32(left.prev), newID: n})
			}
		}
		if left.next >= 0 {
			if rk, n := t.pairRank(left.id, syms[left.next].id); rk != noMerge {
				q = push(q, candidate{rank: rk, pos: int32(p), newID: n})
			}
		}
	}
	for i := 0; i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	sc.syms, sc.queue = syms, q
	return ids
}

func push(q []candidate, c candidate) []candidate {
	q = append(q, c)
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q[i].less(q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
	return q
}

func siftDown(q []candidate, i int) {
	for {
		l := 2*i + 1
		if l >= len(q) {
			return
		}
		m := l
		if r := l + 1; r < len(q) && q[r].less(q[l]) {
			m = r
		}
		if !q[m].less(q[i]) {
			return
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
}
