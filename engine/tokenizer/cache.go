package tokenizer

import (
	"hash/maphash"
	"sync/atomic"
)

// Word cache sizes: a direct-mapped table of cacheSlots words of at most
// cacheMaxWord bytes, so a few hundred KB at most per Tokenizer.
const (
	cacheSlots   = 4096
	cacheMaxWord = 32
)

// wordCache remembers the BPE result of recently merged words. It is safe
// for concurrent use without locks: each slot holds an immutable entry that
// a newer word may replace. Results never depend on what is cached.
type wordCache struct {
	seed  maphash.Seed
	slots [cacheSlots]atomic.Pointer[cachedWord]
}

type cachedWord struct {
	word string
	ids  []int
}

func newWordCache() *wordCache { return &wordCache{seed: maphash.MakeSeed()} }

func (c *wordCache) slot(word []byte) *atomic.Pointer[cachedWord] {
	return &c.slots[maphash.Bytes(c.seed, word)%cacheSlots]
}

// get appends the cached ids of word to ids.
func (c *wordCache) get(ids []int, word []byte) ([]int, bool) {
	e := c.slot(word).Load()
	if e == nil || e.word != string(word) {
		return ids, false
	}
	return append(ids, e.ids...), true
}

func (c *wordCache) put(word []byte, ids []int) {
	c.slot(word).Store(&cachedWord{word: string(word), ids: append([]int(nil), ids...)})
}
