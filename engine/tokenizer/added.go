package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// trie matches added tokens leftmost-longest, like the Aho-Corasick automaton
// (MatchKind::LeftmostLongest) HF tokenizers builds over them.
type trie struct {
	tokens []addedToken
	nodes  []trieNode
	first  [256]bool // bytes that start some token
}

type trieNode struct {
	next  map[byte]int32
	token int32 // index into the token list, -1 if no token ends here
}

func newTrie(tokens []addedToken) *trie {
	tr := &trie{nodes: []trieNode{{token: -1}}}
	tr.tokens = tokens
	for ti, tok := range tokens {
		n := int32(0)
		for k := 0; k < len(tok.content); k++ {
			c := tok.content[k]
			nx, ok := tr.nodes[n].next[c]
			if !ok {
				if tr.nodes[n].next == nil {
					tr.nodes[n].next = make(map[byte]int32)
				}
				nx = int32(len(tr.nodes))
				tr.nodes[n].next[c] = nx
				tr.nodes = append(tr.nodes, trieNode{token: -1})
			}
			n = nx
		}
		tr.nodes[n].token = int32(ti)
		tr.first[tok.content[0]] = true
	}
	return tr
}

// longestAt returns the index of the longest token that starts at s[i] and its
// end, or -1.
func (tr *trie) longestAt(s string, i int) (tok, end int) {
	tok = -1
	n := int32(0)
	for j := i; j < len(s); j++ {
		nx, ok := tr.nodes[n].next[s[j]]
		if !ok {
			break
		}
		n = nx
		if t := tr.nodes[n].token; t >= 0 {
			tok, end = int(t), j+1
		}
	}
	return tok, end
}

// segment is a piece of input text: either an added token (id >= 0) or plain
// text still to be pre-tokenized (id < 0).
type segment struct {
	id   int
	text string
}

// splitAdded splits s around the added tokens of tr, applying their
// single_word, lstrip and rstrip options as HF's AddedVocabulary::find_matches
// does. Empty plain segments are dropped.
func (t *Tokenizer) splitAdded(s string, tr *trie) []segment {
	if len(tr.tokens) == 0 || s == "" {
		return []segment{{id: -1, text: s}}
	}
	var segs []segment
	startOffset := 0
	for i := 0; i < len(s); {
		if !tr.first[s[i]] {
			i++
			continue
		}
		ti, stop := tr.longestAt(s, i)
		if ti < 0 {
			i++
			continue
		}
		start := i
		i = stop // matches never overlap, whatever happens to this one
		tok := tr.tokens[ti]
		if tok.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if tok.lstrip {
			start = max(trailingSpaceStart(s[:start]), startOffset)
		}
		if tok.rstrip {
			stop += leadingSpaceLen(s[stop:])
		}
		if startOffset < start {
			segs = append(segs, segment{id: -1, text: s[startOffset:start]})
		}
		segs = append(segs, segment{id: tok.id})
		startOffset = stop
	}
	if startOffset < len(s) {
		segs = append(segs, segment{id: -1, text: s[startOffset:]})
	}
	return segs
}

// isWordChar is \w of Rust's regex crate (Unicode 16.0): Alphabetic, marks,
// decimal digits, connector punctuation and join controls.
func isWordChar(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_'
	}
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) ||
		unicode.Is(unicode.Join_Control, r) || unicode.Is(unicode16Word, r)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordChar(r)
}

// trailingSpaceStart returns where the run of whitespace at the end of s starts.
func trailingSpaceStart(s string) int {
	for len(s) > 0 {
		r, w := utf8.DecodeLastRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[:len(s)-w]
	}
	return len(s)
}

// leadingSpaceLen returns the length of the run of whitespace that starts s.
func leadingSpaceLen(s string) int {
	n := 0
	for n < len(s) {
		r, w := utf8.DecodeRuneInString(s[n:])
		if !unicode.IsSpace(r) {
			break
		}
		n += w
	}
	return n
}
