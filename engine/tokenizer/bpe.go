package tokenizer

import "container/heap"

// bpeScratch is reused across the words of one Encode call.
type bpeScratch struct {
	syms  []symbol
	queue mergeQueue
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

// mergeQueue is a min-heap by (rank, pos), the order HF's BPE merges in.
type mergeQueue []candidate

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(candidate)) }
func (q *mergeQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// bpeWord appends the ids of one pre-tokenized word (raw bytes, before the
// byte-level mapping) to ids.
func (t *Tokenizer) bpeWord(ids []int, word []byte, sc *bpeScratch) []int {
	if len(word) == 0 {
		return ids
	}
	if t.ignoreMerges {
		if id, ok := t.rawVocab[string(word)]; ok {
			return append(ids, id)
		}
	}
	if len(word) == 1 && t.byteID[word[0]] >= 0 {
		return append(ids, t.byteID[word[0]])
	}

	// One symbol per byte-level character (that is, per byte). Characters
	// missing from the vocabulary become unk_token, or are dropped without one.
	syms := sc.syms[:0]
	unkOpen := false
	for _, b := range word {
		id := t.byteID[b]
		if id < 0 {
			if t.unkID < 0 {
				continue
			}
			if unkOpen && t.fuseUnk {
				continue
			}
			id = t.unkID
			unkOpen = true
		} else {
			unkOpen = false
		}
		syms = append(syms, symbol{id: id, prev: len(syms) - 1, next: len(syms) + 1})
	}
	if len(syms) == 0 {
		sc.syms = syms
		return ids
	}
	syms[len(syms)-1].next = -1

	q := sc.queue[:0]
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := t.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			q = append(q, candidate{rank: m.rank, pos: int32(i), newID: m.newID})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		c := heap.Pop(&q).(candidate)
		p := int(c.pos)
		left := &syms[p]
		if left.gone || left.next < 0 {
			continue
		}
		r := left.next
		// Skip stale candidates: the pair at p must still merge into newID.
		m, ok := t.merges[pairKey(left.id, syms[r].id)]
		if !ok || m.newID != c.newID {
			continue
		}
		left.id = int(c.newID)
		left.next = syms[r].next
		syms[r].gone = true
		if left.next >= 0 {
			syms[left.next].prev = p
		}
		if left.prev >= 0 {
			if m, ok := t.merges[pairKey(syms[left.prev].id, left.id)]; ok {
				heap.Push(&q, candidate{rank: m.rank, pos: int32(left.prev), newID: m.newID})
			}
		}
		if left.next >= 0 {
			if m, ok := t.merges[pairKey(left.id, syms[left.next].id)]; ok {
				heap.Push(&q, candidate{rank: m.rank, pos: int32(p), newID: m.newID})
			}
		}
	}
	for i := 0; i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	sc.syms, sc.queue = syms, q
	return ids
}
