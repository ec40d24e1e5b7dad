package tokenizer

import (
	"hash/maphash"
	"math/bits"
)

// Loading a 155k-entry vocabulary is dominated by hash table work, and Go's
// maps touch several cache lines per probe (control word, slot, key bytes).
// The two tables here keep what a probe needs in one 16-byte slot, and are
// built once and then only read, so they are safe for concurrent use.

// tableSize returns a power-of-two slot count that keeps the load at most 3/4.
func tableSize(n int) (size int, shift uint) {
	size = 8
	for size*3 < n*4 {
		size *= 2
	}
	return size, uint(64 - bits.TrailingZeros(uint(size)))
}

// vocabTable maps token strings to ids, with open addressing and linear
// probing. The keys are substrings of one string.
type vocabTable struct {
	seed  maphash.Seed
	keys  string
	slots []vocabSlot
	shift uint // 64 - log2(len(slots))
	n     int
}

type vocabSlot struct {
	hash       uint32 // top bits of the key's hash, with the low bit set so that 0 marks an empty slot
	start, end uint32 // the key is keys[start:end]
	id         int32
}

// newVocabTable returns an empty table for about n keys, all substrings of keys.
func newVocabTable(keys string, n int) *vocabTable {
	size, shift := tableSize(n)
	return &vocabTable{seed: maphash.MakeSeed(), keys: keys, slots: make([]vocabSlot, size), shift: shift}
}

func (v *vocabTable) len() int { return v.n }

// put maps keys[start:end] to id, replacing an earlier id for the same key.
func (v *vocabTable) put(start, end uint32, id int32) {
	key := v.keys[start:end]
	h := maphash.String(v.seed, key)
	tag := uint32(h>>32) | 1
	mask := len(v.slots) - 1
	for i := int(h >> v.shift); ; i = (i + 1) & mask {
		s := &v.slots[i]
		if s.hash == 0 {
			*s = vocabSlot{hash: tag, start: start, end: end, id: id}
			v.n++
			return
		}
		if s.hash == tag && v.keys[s.start:s.end] == key {
			s.id = id
			return
		}
	}
}

// get returns the id of key.
func (v *vocabTable) get(key string) (int, bool) {
	h := maphash.String(v.seed, key)
	tag := uint32(h>>32) | 1
	mask := len(v.slots) - 1
	for i := int(h >> v.shift); ; i = (i + 1) & mask {
		s := &v.slots[i]
		if s.hash == 0 {
			return 0, false
		}
		if s.hash == tag && v.keys[s.start:s.end] == key {
			return int(s.id), true
		}
	}
}

// getBytes is get for a key held in a byte slice.
func (v *vocabTable) getBytes(key []byte) (int, bool) {
	h := maphash.Bytes(v.seed, key)
	tag := uint32(h>>32) | 1
	mask := len(v.slots) - 1
	for i := int(h >> v.shift); ; i = (i + 1) & mask {
		s := &v.slots[i]
		if s.hash == 0 {
			return 0, false
		}
		if s.hash == tag && v.keys[s.start:s.end] == string(key) {
			return int(s.id), true
		}
	}
}

// all calls yield for each key and id, in no particular order.
func (v *vocabTable) all(yield func(key string, id int) bool) {
	for _, s := range v.slots {
		if s.hash != 0 && !yield(v.keys[s.start:s.end], int(s.id)) {
			return
		}
	}
}

// mergeTable maps a pair of ids (pairKey) to their merge.
type mergeTable struct {
	slots []mergeSlot
	shift uint
}

type mergeSlot struct {
	key uint64 // pairKey + 1, so that 0 marks an empty slot
	m   merge
}

func newMergeTable(n int) *mergeTable {
	size, shift := tableSize(n)
	return &mergeTable{slots: make([]mergeSlot, size), shift: shift}
}

// home is the first slot to probe for key. A Fibonacci hash spreads the id
// pairs of real vocabularies well; a file crafted to collide only slows its
// own loading.
func (m *mergeTable) home(key uint64) int { return int((key * 0x9E3779B97F4A7C15) >> m.shift) }

// put sets the merge of key, replacing an earlier one.
func (m *mergeTable) put(key uint64, mg merge) {
	key++
	mask := len(m.slots) - 1
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == 0 || s.key == key {
			*s = mergeSlot{key: key, m: mg}
			return
		}
	}
}

// get returns the merge of key.
func (m *mergeTable) get(key uint64) (merge, bool) {
	key++
	mask := len(m.slots) - 1
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == key {
			return s.m, true
		}
		if s.key == 0 {
			return merge{}, false
		}
	}
}
