package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// glmPattern is the pre-tokenizer split regex of GLM-4.x/5.x tokenizers. Go's
// regexp cannot express its lookahead, so glmMatchEnd implements it by hand.
const glmPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// headerJSON is tokenizer.json without its model.
type headerJSON struct {
	Truncation    json.RawMessage  `json:"truncation"`
	Padding       json.RawMessage  `json:"padding"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
}

type fileJSON struct {
	headerJSON
	Model *modelJSON `json:"model"`
}

type addedTokenJSON struct {
	ID         *int   `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	Lstrip     bool   `json:"lstrip"`
	Rstrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

// modelJSON is the model object without vocab and merges, which
// splitDocument decodes.
type modelJSON struct {
	Type                    string   `json:"type"`
	Dropout                 *float64 `json:"dropout"`
	UnkToken                *string  `json:"unk_token"`
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	FuseUnk                 bool     `json:"fuse_unk"`
	ByteFallback            bool     `json:"byte_fallback"`
	IgnoreMerges            bool     `json:"ignore_merges"`
}

type preTokJSON struct {
	Type           string       `json:"type"`
	PreTokenizers  []preTokJSON `json:"pretokenizers"`
	Pattern        *patternJSON `json:"pattern"`
	Behavior       string       `json:"behavior"`
	Invert         bool         `json:"invert"`
	AddPrefixSpace bool         `json:"add_prefix_space"`
	UseRegex       bool         `json:"use_regex"`
}

type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

type typeJSON struct {
	Type        string            `json:"type"`
	Normalizers []json.RawMessage `json:"normalizers"`
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// Parse builds a Tokenizer from the contents of a tokenizer.json file.
func Parse(data []byte) (*Tokenizer, error) {
	doc, err := splitDocument(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: parse tokenizer.json: %w", err)
	}
	var f fileJSON
	if err := json.Unmarshal(doc.rest, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: parse tokenizer.json: %w", err)
	}
	if err := f.check(); err != nil {
		return nil, err
	}

	t := &Tokenizer{unkID: -1}
	if err := t.parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := t.parseModel(f.Model, &doc.vocab, &doc.merges, len(f.AddedTokens)); err != nil {
		return nil, err
	}
	if err := t.parseAdded(f.AddedTokens); err != nil {
		return nil, err
	}
	t.buildTables()
	t.cache = newWordCache()
	return t, nil
}

// check refuses the top-level settings Parse does not implement: truncation,
// padding, a normalizer, a decoder other than ByteLevel.
func (h *headerJSON) check() error {
	if !isNull(h.Truncation) {
		return errors.New("tokenizer: truncation is set in tokenizer.json; only null is supported")
	}
	if !isNull(h.Padding) {
		return errors.New("tokenizer: padding is set in tokenizer.json; only null is supported")
	}
	if err := checkNormalizer(h.Normalizer); err != nil {
		return err
	}
	if isNull(h.Decoder) {
		return errors.New("tokenizer: decoder is null; only ByteLevel is supported")
	}
	var dec typeJSON
	if err := json.Unmarshal(h.Decoder, &dec); err != nil {
		return fmt.Errorf("tokenizer: parse decoder: %w", err)
	}
	if dec.Type != "ByteLevel" {
		return fmt.Errorf("tokenizer: decoder type %q is not supported (only ByteLevel)", dec.Type)
	}
	if !isNull(h.PostProcessor) {
		// With add_special_tokens=False no post-processor adds or changes ids,
		// so any well-formed one is accepted and ignored.
		var pp typeJSON
		if err := json.Unmarshal(h.PostProcessor, &pp); err != nil {
			return fmt.Errorf("tokenizer: parse post_processor: %w", err)
		}
	}
	return nil
}

func checkNormalizer(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var n typeJSON
	if err := json.Unmarshal(raw, &n); err != nil {
		return fmt.Errorf("tokenizer: parse normalizer: %w", err)
	}
	if n.Type == "Sequence" && len(n.Normalizers) == 0 {
		return nil
	}
	return fmt.Errorf("tokenizer: normalizer type %q is not supported (only null)", n.Type)
}

func (t *Tokenizer) parsePreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		return errors.New("tokenizer: pre_tokenizer is null; a ByteLevel pre-tokenizer is required")
	}
	var p preTokJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("tokenizer: parse pre_tokenizer: %w", err)
	}
	steps := []preTokJSON{p}
	if p.Type == "Sequence" {
		steps = p.PreTokenizers
	}
	byteLevel := false
	for i, s := range steps {
		where := fmt.Sprintf("tokenizer: pre_tokenizer step %d (%s)", i, s.Type)
		if byteLevel {
			return fmt.Errorf("%s: steps after ByteLevel are not supported", where)
		}
		switch s.Type {
		case "Split":
			if t.splitGLM {
				return fmt.Errorf("%s: more than one Split is not supported", where)
			}
			if s.Pattern == nil || s.Pattern.Regex == nil {
				return fmt.Errorf("%s: only a Regex pattern is supported", where)
			}
			if *s.Pattern.Regex != glmPattern {
				return fmt.Errorf("%s: regex %q is not supported (only the GLM pattern %q)", where, *s.Pattern.Regex, glmPattern)
			}
			if s.Behavior != "Isolated" {
				return fmt.Errorf("%s: behavior %q is not supported (only Isolated)", where, s.Behavior)
			}
			if s.Invert {
				return fmt.Errorf("%s: invert=true is not supported", where)
			}
			t.splitGLM = true
		case "ByteLevel":
			if s.UseRegex {
				return fmt.Errorf("%s: use_regex=true is not supported", where)
			}
			t.addPrefixSpace = s.AddPrefixSpace
			byteLevel = true
		default:
			return fmt.Errorf("%s: pre-tokenizer type %q is not supported (only Split and ByteLevel)", where, s.Type)
		}
	}
	if !byteLevel {
		return errors.New("tokenizer: pre_tokenizer has no ByteLevel step; only byte-level BPE is supported")
	}
	return nil
}

// maxID bounds token ids so that a hostile file cannot make the id tables
// huge: real vocabularies are dense.
func maxID(entries int) int { return 2*entries + 1024 }

// check refuses the BPE settings the encoder does not implement.
func (m *modelJSON) check() error {
	if m.Type != "BPE" {
		return fmt.Errorf("tokenizer: model type %q is not supported (only BPE)", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return fmt.Errorf("tokenizer: model.dropout=%v is not supported (only null or 0)", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return fmt.Errorf("tokenizer: model.continuing_subword_prefix=%q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return fmt.Errorf("tokenizer: model.end_of_word_suffix=%q is not supported", *m.EndOfWordSuffix)
	}
	if m.ByteFallback {
		return errors.New("tokenizer: model.byte_fallback=true is not supported")
	}
	return nil
}

func (t *Tokenizer) parseModel(m *modelJSON, vocab *vocabList, merges *mergeList, nAdded int) error {
	if m == nil {
		return errors.New("tokenizer: model is missing")
	}
	if err := m.check(); err != nil {
		return err
	}
	if err := t.buildVocab(vocab, nAdded); err != nil {
		return err
	}
	if m.UnkToken != nil {
		id, ok := t.vocab.get(*m.UnkToken)
		if !ok {
			return fmt.Errorf("tokenizer: model.unk_token %q is not in the vocabulary", *m.UnkToken)
		}
		t.unkID = id
	}
	t.fuseUnk = m.FuseUnk
	t.ignoreMerges = m.IgnoreMerges
	return t.buildMerges(merges)
}

// buildVocab fills the vocabulary table and the id -> string table.
func (t *Tokenizer) buildVocab(v *vocabList, nAdded int) error {
	n := v.len()
	if n == 0 {
		return errors.New("tokenizer: model.vocab is empty")
	}
	// As when decoding into a map, a later duplicate key replaces an earlier
	// one. Ids are checked below, before any is used.
	t.vocab = newVocabTable(v.arena, n)
	start := uint32(0)
	for k, id := range v.ids {
		t.vocab.put(start, v.ends[k], int32(id))
		start = v.ends[k]
	}
	dups := t.vocab.len() < n

	limit := maxID(t.vocab.len() + nAdded)
	var last map[string]int // key -> index of its last entry, when needed
	for k, id := range v.ids {
		if id >= 0 && id <= limit {
			t.vocabSize = max(t.vocabSize, id+1)
			continue
		}
		if dups {
			if last == nil {
				last = make(map[string]int, n)
				for j := range n {
					last[v.key(j)] = j
				}
			}
			if last[v.key(k)] != k {
				continue // replaced by a later entry
			}
		}
		return fmt.Errorf("tokenizer: model.vocab: token %q has id %d, outside [0, %d] (sparse vocabularies are not supported)", v.key(k), id, limit)
	}
	if dups {
		// The ids of replaced entries do not count.
		t.vocabSize = 0
		t.vocab.all(func(_ string, id int) bool {
			t.vocabSize = max(t.vocabSize, id+1)
			return true
		})
	}

	// Added tokens usually follow the vocabulary: leave room for them.
	size := max(t.vocabSize, t.vocab.len()+nAdded)
	t.tokenStrings = make([]string, t.vocabSize, size)
	t.hasToken = make([]bool, t.vocabSize, size)
	add := func(tok string, id int) bool {
		// Two strings with one id: keep the smaller, for determinism.
		if !t.hasToken[id] || tok < t.tokenStrings[id] {
			t.tokenStrings[id], t.hasToken[id] = tok, true
		}
		return true
	}
	if dups {
		t.vocab.all(add)
		return nil
	}
	for k, id := range v.ids {
		add(v.key(k), id)
	}
	return nil
}

// buildMerges fills the merge table, ranking merges by their position.
func (t *Tokenizer) buildMerges(ml *mergeList) error {
	if ml.typeErr != nil {
		return ml.typeErr
	}
	if ml.shapeErr != nil {
		return ml.shapeErr
	}
	n := ml.len()
	if n > math.MaxInt32 {
		return fmt.Errorf("tokenizer: model.merges: too many merges (%d)", n)
	}
	t.merges = newMergeTable(n)
	guess := -1
	for i := range n {
		a, b, ab := ml.pair(i)
		idA, ok := t.vocab.getBytes(a)
		if !ok {
			return fmt.Errorf("tokenizer: model.merges[%d]: token %q is not in the vocabulary", i, a)
		}
		idB, ok := t.vocab.getBytes(b)
		if !ok {
			return fmt.Errorf("tokenizer: model.merges[%d]: token %q is not in the vocabulary", i, b)
		}
		// Merged tokens usually have consecutive ids in merge order; a guess
		// checked against the id's string saves a map lookup.
		guess++
		idAB := guess
		if guess >= len(t.tokenStrings) || !t.hasToken[guess] || t.tokenStrings[guess] != string(ab) {
			if idAB, ok = t.vocab.getBytes(ab); !ok {
				return fmt.Errorf("tokenizer: model.merges[%d]: merged token %q is not in the vocabulary", i, ab)
			}
			guess = idAB
		}
		// A later duplicate overwrites an earlier one, as in HF tokenizers.
		t.merges.put(pairKey(idA, idB), merge{rank: int32(i), newID: int32(idAB)})
	}
	return nil
}

func pairKey(a, b int) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// parseAdded validates the added tokens. A file whose ids disagree with the
// ones HF tokenizers would assign, or that lists a content twice, is rejected
// rather than silently renumbered.
func (t *Tokenizer) parseAdded(list []addedTokenJSON) error {
	t.addedByID = make(map[int]int, len(list))
	t.addedByText = make(map[string]int, len(list))
	maxAdded := -1
	for i, a := range list {
		where := fmt.Sprintf("tokenizer: added_tokens[%d] (%q)", i, a.Content)
		if a.ID == nil {
			return fmt.Errorf("%s: id is missing", where)
		}
		id := *a.ID
		if limit := maxID(t.vocab.len() + len(list)); id < 0 || id > limit {
			return fmt.Errorf("%s: id %d outside [0, %d]", where, id, limit)
		}
		if a.Content == "" {
			return fmt.Errorf("%s: content is empty", where)
		}
		// HF tokenizers re-derives ids on load: a token already in the
		// vocabulary keeps its vocabulary id, any other one gets the next id
		// after the vocabulary (or after the largest added id).
		want, inVocab := t.vocab.get(a.Content)
		if !inVocab {
			want = t.vocab.len()
			if maxAdded >= t.vocab.len() {
				want = maxAdded + 1
			}
		}
		if id != want {
			return fmt.Errorf("%s: id %d in the file, but HF tokenizers would assign id %d", where, id, want)
		}
		maxAdded = max(maxAdded, id)
		if j, ok := t.addedByID[id]; ok {
			return fmt.Errorf("%s: id %d is also used by %q", where, id, t.added[j].content)
		}
		if _, ok := t.addedByText[a.Content]; ok {
			return fmt.Errorf("%s: content appears twice", where)
		}
		if id < len(t.hasToken) && t.hasToken[id] && t.tokenStrings[id] != a.Content {
			return fmt.Errorf("%s: id %d is the vocabulary token %q", where, id, t.tokenStrings[id])
		}
		normalized := !a.Special
		if a.Normalized != nil {
			normalized = *a.Normalized
		}
		tok := addedToken{
			id: id, content: a.Content, singleWord: a.SingleWord, lstrip: a.Lstrip,
			rstrip: a.Rstrip, normalized: normalized, special: a.Special,
		}
		t.addedByID[id] = len(t.added)
		t.addedByText[a.Content] = len(t.added)
		t.added = append(t.added, tok)
		if id+1 > t.vocabSize {
			t.vocabSize = id + 1
		}
	}
	// HF builds the matchers from special tokens first, then the others; the
	// order only matters for tokens with identical content, which are rejected
	// above, so file order is kept.
	var raw, norm []addedToken
	for _, a := range t.added {
		if a.normalized {
			norm = append(norm, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.rawTrie = newTrie(raw)
	t.normTrie = newTrie(norm)
	return nil
}

// buildTables fills the per-id tables and the byte-level lookups.
func (t *Tokenizer) buildTables() {
	if n := t.vocabSize - len(t.tokenStrings); n > 0 {
		t.tokenStrings = append(t.tokenStrings, make([]string, n)...)
		t.hasToken = append(t.hasToken, make([]bool, n)...)
	}
	for _, a := range t.added {
		t.tokenStrings[a.id], t.hasToken[a.id] = a.content, true
	}

	t.skipOnSpecial = make([]bool, t.vocabSize)
	// parseAdded guarantees that a special token's content is the string of
	// no other id.
	for _, a := range t.added {
		t.skipOnSpecial[a.id] = a.special
	}

	for b := range 256 {
		t.byteID[b] = -1
		if id, ok := t.vocab.get(string(byteToRune[b])); ok {
			t.byteID[b] = id
		}
	}
}
