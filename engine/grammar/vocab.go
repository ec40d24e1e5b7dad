package grammar

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/spoolhq/spool/engine/tokenizer"
)

// maxPlainRunes bounds the character count of tokens served from the plain
// string-content bitsets; longer ones are walked like any other token.
const maxPlainRunes = 64

// Vocab is a tokenizer's vocabulary prepared for masking. It is built once
// per tokenizer, immutable, and shared by every Matcher.
type Vocab struct {
	size   int
	tokens [][]byte
	banned []bool // never allowed: special, excluded or empty tokens
	eos    []int
	// The tokens that are not banned, in two tries: plain string content
	// (see plain) and the rest.
	plainTrie trie
	rest      trie
	// plain[k] is the bitset of tokens that are plain string content (valid
	// UTF-8, no quote, backslash or control byte) of at most k characters.
	plain [][]uint64
	// angle is the bitset of tokens holding a '<', which raw string values
	// (see CompileArguments) never contain.
	angle  []uint64
	maxLen int // longest token in bytes
}

// trie is a byte trie over token bytes; a node's children are contiguous.
type trie struct {
	nodes []tnode
	ids   []int32
}

type tnode struct {
	kidLo, kidHi int32 // children
	idLo, idHi   int32 // tokens ending here, in ids
	b            byte  // the byte leading here
}

// NewVocab prepares a vocabulary. tokens[id] is the byte string token id
// decodes to; excluded[id] marks ids that must never appear inside the
// output (special and control tokens; excluded may be shorter than tokens).
// eos lists the ids that end a generation; they are allowed exactly when
// the output is complete.
func NewVocab(tokens [][]byte, excluded []bool, eos []int) (*Vocab, error) {
	v := &Vocab{size: len(tokens), tokens: make([][]byte, len(tokens)), banned: make([]bool, len(tokens))}
	total := 0
	for _, t := range tokens {
		total += len(t)
	}
	buf := make([]byte, 0, total)
	for id, t := range tokens {
		buf = append(buf, t...)
		v.tokens[id] = buf[len(buf)-len(t) : len(buf) : len(buf)]
	}
	tokens = v.tokens
	for _, id := range eos {
		if id < 0 || id >= len(tokens) {
			return nil, fmt.Errorf("grammar: end-of-sequence id %d is outside the vocabulary (%d ids)", id, len(tokens))
		}
		if !slices.Contains(v.eos, id) {
			v.eos = append(v.eos, id)
		}
	}
	if len(excluded) > len(tokens) {
		return nil, fmt.Errorf("grammar: %d exclusion flags for %d tokens", len(excluded), len(tokens))
	}
	var rest []int32
	var runes []int // character count of each plain token, by position in plainIDs
	var plainIDs []int32
	maxRunes := 0
	for id, t := range tokens {
		if len(t) == 0 || id < len(excluded) && excluded[id] || slices.Contains(v.eos, id) {
			v.banned[id] = true
			continue
		}
		v.maxLen = max(v.maxLen, len(t))
		if n, ok := plainRunes(t); ok && n <= maxPlainRunes {
			plainIDs = append(plainIDs, int32(id))
			runes = append(runes, n)
			maxRunes = max(maxRunes, n)
			continue
		}
		rest = append(rest, int32(id))
	}
	v.plainTrie = buildTrie(tokens, plainIDs)
	v.rest = buildTrie(tokens, rest)
	words := (len(tokens) + 63) / 64
	v.plain = make([][]uint64, maxRunes+1)
	for k := range v.plain {
		v.plain[k] = make([]uint64, words)
	}
	for i, id := range plainIDs {
		for k := runes[i]; k <= maxRunes; k++ {
			v.plain[k][id>>6] |= 1 << (id & 63)
		}
	}
	v.angle = make([]uint64, words)
	for id, t := range tokens {
		if bytes.IndexByte(t, '<') >= 0 {
			v.angle[id>>6] |= 1 << (id & 63)
		}
	}
	return v, nil
}

// TokenizerVocab prepares the vocabulary of a tokenizer. Special tokens are
// excluded; eos are the model's end-of-sequence ids.
func TokenizerVocab(t *tokenizer.Tokenizer, eos []int) (*Vocab, error) {
	n := t.VocabSize()
	tokens := make([][]byte, n)
	excluded := make([]bool, n)
	for id := range n {
		b, ok := t.TokenBytes(id)
		tokens[id] = b
		excluded[id] = !ok || t.IsSpecial(id)
	}
	return NewVocab(tokens, excluded, eos)
}

// Size is the number of token ids; masks have (Size()+63)/64 words.
func (v *Vocab) Size() int { return v.size }

// MaskWords is the length of a mask for this vocabulary.
func (v *Vocab) MaskWords() int { return (v.size + 63) / 64 }

// plainRunes reports whether t is plain string content and its character count.
func plainRunes(t []byte) (int, bool) {
	if !utf8.Valid(t) {
		return 0, false
	}
	for _, c := range t {
		if c < 0x20 || c == '"' || c == '\\' {
			return 0, false
		}
	}
	return utf8.RuneCount(t), true
}

// buildTrie builds the trie of the given token ids, breadth first so that
// each node's children are contiguous.
func buildTrie(tokens [][]byte, ids []int32) trie {
	ids = slices.Clone(ids)
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(tokens[a], tokens[b]) })
	type span struct {
		node, lo, hi, depth int32
	}
	t := trie{nodes: []tnode{{}}}
	queue := []span{{0, 0, int32(len(ids)), 0}}
	for q := 0; q < len(queue); q++ {
		s := queue[q]
		lo := s.lo
		idLo := int32(len(t.ids))
		for lo < s.hi && int32(len(tokens[ids[lo]])) == s.depth {
			t.ids = append(t.ids, ids[lo])
			lo++
		}
		nd := &t.nodes[s.node]
		nd.idLo, nd.idHi = idLo, int32(len(t.ids))
		nd.kidLo = int32(len(t.nodes))
		for lo < s.hi {
			c := tokens[ids[lo]][s.depth]
			hi := lo + 1
			for hi < s.hi && tokens[ids[hi]][s.depth] == c {
				hi++
			}
			t.nodes = append(t.nodes, tnode{b: c})
			queue = append(queue, span{int32(len(t.nodes) - 1), lo, hi, s.depth + 1})
			lo = hi
		}
		t.nodes[s.node].kidHi = int32(len(t.nodes))
	}
	return t
}
