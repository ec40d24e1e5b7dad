package tokenizer

import (
	"fmt"

	"github.com/spoolhq/spool/internal/regularfile"
)

// Tokenizer encodes text to token ids and decodes ids to text. Its tables are
// immutable after Load/Parse (only a lock-free cache of recent words changes)
// and it is safe for concurrent use.
type Tokenizer struct {
	// model (BPE) vocabulary
	vocab        *vocabTable // token string (byte-level form) -> id
	byteID       [256]int    // id of the single byte-level character for each byte, -1 if absent
	merges       *mergeTable
	ignoreMerges bool
	unkID        int // -1 when the model has no unk_token
	fuseUnk      bool
	cache        *wordCache // BPE results of recent words; nil disables it

	// pre-tokenizer
	splitGLM       bool // apply the GLM regex split before byte-level mapping
	addPrefixSpace bool // ByteLevel add_prefix_space

	// added tokens
	added         []addedToken
	addedByID     map[int]int // id -> index in added
	addedByText   map[string]int
	rawTrie       *trie // tokens with normalized=false, matched on the raw text
	normTrie      *trie // tokens with normalized=true, matched after normalization
	vocabSize     int
	tokenStrings  []string // id -> token string ("" with has=false when unused)
	hasToken      []bool
	skipOnSpecial []bool // id -> dropped by Decode(ids, true)
}

type merge struct {
	rank  int32
	newID int32
}

type addedToken struct {
	id         int
	content    string
	singleWord bool
	lstrip     bool
	rstrip     bool
	normalized bool
	special    bool
}

// MaxFileBytes bounds tokenizer.json: GLM's is about 20 MB, the largest
// public ones (256k-entry vocabularies) about 35 MB. A larger file is
// refused by its size before it is read. Parsing allocates at most
// ParseAllocFactor times the file (GLM's: 2.9 per byte; hostile lists of
// added tokens or merges: up to 7.8), before any weight is loaded (so
// before any line of the memory plan fills and its garbage is collected
// by then), and the largest accepted file costs at most the plan's runtime
// reserve (plan.DefaultRuntimeReserve, 512 MiB; limit_test.go checks it).
// A 500 MB file used to be read whole and cost 1.2-4 GB before it was
// refused.
const MaxFileBytes = 48 << 20

// ParseAllocFactor bounds the bytes Parse allocates per byte of input
// (with headroom over the 7.8 measured).
const ParseAllocFactor = 10

// Load reads and parses a tokenizer.json file of at most MaxFileBytes.
func Load(path string) (*Tokenizer, error) {
	return loadLimit(path, MaxFileBytes)
}

// loadLimit is Load with another size limit (tests).
func loadLimit(path string, limit int64) (*Tokenizer, error) {
	data, err := regularfile.Read(path, limit)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// VocabSize returns the largest id of the vocabulary or the added tokens plus one.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenID returns the id of a token given by its string: an added token's
// content, or a vocabulary entry in its byte-level form (for example "Ġthe").
// Added tokens take precedence, as in HF tokenizers.
func (t *Tokenizer) TokenID(token string) (int, bool) {
	if i, ok := t.addedByText[token]; ok {
		return t.added[i].id, true
	}
	id, ok := t.vocab.get(token)
	return id, ok
}

// TokenString returns the string of a token id: an added token's content, or a
// vocabulary entry in its byte-level form. It reports false for ids that are
// not in the vocabulary.
func (t *Tokenizer) TokenString(id int) (string, bool) {
	if id < 0 || id >= len(t.hasToken) || !t.hasToken[id] {
		return "", false
	}
	return t.tokenStrings[id], true
}

// TokenBytes returns a copy of the bytes a token decodes to (a token may hold
// part of a multi-byte character). It reports false for ids that are not in
// the vocabulary.
func (t *Tokenizer) TokenBytes(id int) ([]byte, bool) {
	if id < 0 || id >= len(t.hasToken) || !t.hasToken[id] {
		return nil, false
	}
	return appendByteLevelDecode(nil, t.tokenStrings[id]), true
}

// IsSpecial reports whether id is a special added token (a control token such
// as "<|user|>" or "[gMASK]"). Content markers such as "<think>" are not special.
func (t *Tokenizer) IsSpecial(id int) bool {
	i, ok := t.addedByID[id]
	return ok && t.added[i].special
}

// Encode converts text to token ids like HF tokenizers'
// encode(text, add_special_tokens=False). Added tokens written in the text are
// recognized. Text that is not valid UTF-8 (which HF cannot receive) is
// encoded byte for byte, each invalid byte counting as a punctuation-like
// character; Decode renders such bytes as U+FFFD.
func (t *Tokenizer) Encode(text string) []int {
	ids, _ := t.encode(text, -1)
	return ids
}

// EncodeLimit is Encode that stops as soon as the text has produced more
// than limit tokens; ok reports whether it fit. A caller that refuses long
// prompts does no more work than the limit needs.
func (t *Tokenizer) EncodeLimit(text string, limit int) (ids []int, ok bool) {
	return t.encode(text, max(limit, 0))
}

// encode encodes text, stopping once it produced more than limit tokens
// (limit < 0: no limit).
func (t *Tokenizer) encode(text string, limit int) ([]int, bool) {
	var e encoder
	e.t = t
	e.limit = limit
	guess := len(text)/3 + 1
	if limit >= 0 {
		guess = min(guess, limit+1)
	}
	e.ids = make([]int, 0, guess)
	for _, seg := range t.splitAdded(text, t.rawTrie) {
		if e.full() {
			return e.ids, false
		}
		if seg.id >= 0 {
			e.ids = append(e.ids, seg.id)
			continue
		}
		// No normalizer is supported, so the normalized text is the text itself.
		for _, seg2 := range t.splitAdded(seg.text, t.normTrie) {
			if e.full() {
				return e.ids, false
			}
			if seg2.id >= 0 {
				e.ids = append(e.ids, seg2.id)
				continue
			}
			e.pretokenize(seg2.text)
		}
	}
	return e.ids, !e.full()
}

// encoder holds the scratch state of one Encode call.
type encoder struct {
	t     *Tokenizer
	ids   []int
	bpe   bpeScratch
	buf   []byte
	limit int // stop past this many tokens; < 0: no limit
}

// full reports whether the encoder has produced more than its limit.
func (e *encoder) full() bool { return e.limit >= 0 && len(e.ids) > e.limit }

func (e *encoder) pretokenize(s string) {
	if s == "" {
		return
	}
	if !e.t.splitGLM {
		e.word(s)
		return
	}
	for i := 0; i < len(s) && !e.full(); {
		j := glmMatchEnd(s, i)
		e.word(s[i:j])
		i = j
	}
}

// word byte-level encodes one pre-tokenized piece and runs BPE on it.
func (e *encoder) word(s string) {
	if e.t.addPrefixSpace && (len(s) == 0 || s[0] != ' ') {
		e.buf = append(e.buf[:0], ' ')
		e.buf = append(e.buf, s...)
		e.ids = e.t.bpeWord(e.ids, e.buf, &e.bpe)
		return
	}
	e.buf = append(e.buf[:0], s...)
	e.ids = e.t.bpeWord(e.ids, e.buf, &e.bpe)
}
