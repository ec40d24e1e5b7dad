package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/fixtures"
)

// This file keeps the original encoding/json implementation of Parse as a
// reference: the fast scanner in scan.go must build exactly the same tables.

// refFileJSON is the whole file: vocab and merges through encoding/json.
type refFileJSON struct {
	headerJSON
	Model *refModelJSON `json:"model"`
}

type refModelJSON struct {
	modelJSON
	Vocab  map[string]int  `json:"vocab"`
	Merges json.RawMessage `json:"merges"`
}

// refTokenizer is a Tokenizer built by the reference, with the table the fast
// path no longer keeps.
type refTokenizer struct {
	*Tokenizer
	vocab       map[string]int
	merges      map[uint64]merge
	rawVocab    map[string]int
	decodeBytes [][]byte // id -> bytes the ByteLevel decoder produces for it
}

func parseReference(data []byte) (*refTokenizer, error) {
	var f refFileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer: parse tokenizer.json: %w", err)
	}
	// The top-level checks are Parse's: this reference stands for the
	// vocabulary and merges scanner only.
	if err := f.check(); err != nil {
		return nil, err
	}
	t := &refTokenizer{Tokenizer: &Tokenizer{unkID: -1}}
	if err := t.parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := t.refParseModel(f.Model, len(f.AddedTokens)); err != nil {
		return nil, err
	}
	// parseAdded, shared with the fast path, reads the vocabulary table.
	var keys strings.Builder
	var ends []uint32
	var ids []int32
	for s, id := range t.vocab {
		keys.WriteString(s)
		ends = append(ends, uint32(keys.Len()))
		ids = append(ids, int32(id))
	}
	t.Tokenizer.vocab = newVocabTable(keys.String(), len(ids))
	start := uint32(0)
	for k, id := range ids {
		t.Tokenizer.vocab.put(start, ends[k], id)
		start = ends[k]
	}
	if err := t.parseAdded(f.AddedTokens); err != nil {
		return nil, err
	}
	t.refBuildTables()
	return t, nil
}

func (t *refTokenizer) refParseModel(m *refModelJSON, nAdded int) error {
	if m == nil {
		return errors.New("tokenizer: model is missing")
	}
	if err := m.check(); err != nil {
		return err
	}
	if len(m.Vocab) == 0 {
		return errors.New("tokenizer: model.vocab is empty")
	}
	t.vocab = m.Vocab
	limit := maxID(len(m.Vocab) + nAdded)
	for tok, id := range m.Vocab {
		if id < 0 || id > limit {
			return fmt.Errorf("tokenizer: model.vocab: token %q has id %d, outside [0, %d] (sparse vocabularies are not supported)", tok, id, limit)
		}
		if id+1 > t.vocabSize {
			t.vocabSize = id + 1
		}
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return fmt.Errorf("tokenizer: model.unk_token %q is not in the vocabulary", *m.UnkToken)
		}
		t.unkID = id
	}
	t.tokenStrings = make([]string, t.vocabSize)
	t.hasToken = make([]bool, t.vocabSize)
	for tok, id := range m.Vocab {
		if !t.hasToken[id] || tok < t.tokenStrings[id] {
			t.tokenStrings[id], t.hasToken[id] = tok, true
		}
	}
	t.fuseUnk = m.FuseUnk
	t.ignoreMerges = m.IgnoreMerges

	pairs, err := refParseMerges(m.Merges)
	if err != nil {
		return err
	}
	t.merges = make(map[uint64]merge, len(pairs))
	for i, p := range pairs {
		a, ok := m.Vocab[p[0]]
		if !ok {
			return fmt.Errorf("tokenizer: model.merges[%d]: token %q is not in the vocabulary", i, p[0])
		}
		b, ok := m.Vocab[p[1]]
		if !ok {
			return fmt.Errorf("tokenizer: model.merges[%d]: token %q is not in the vocabulary", i, p[1])
		}
		n, ok := m.Vocab[p[0]+p[1]]
		if !ok {
			return fmt.Errorf("tokenizer: model.merges[%d]: merged token %q is not in the vocabulary", i, p[0]+p[1])
		}
		if i > math.MaxInt32 {
			return fmt.Errorf("tokenizer: model.merges: too many merges (%d)", len(pairs))
		}
		t.merges[pairKey(a, b)] = merge{rank: int32(i), newID: int32(n)}
	}
	return nil
}

func refParseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	first := bytes.TrimLeft(bytes.TrimLeft(bytes.TrimSpace(raw), "["), " \t\r\n")
	var strs []string
	if len(first) > 0 && first[0] == '"' && json.Unmarshal(raw, &strs) == nil {
		out := make([][2]string, len(strs))
		for i, s := range strs {
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("tokenizer: model.merges[%d] = %q: want two tokens separated by one space", i, s)
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("tokenizer: parse model.merges: want a list of strings \"a b\" or of pairs [\"a\", \"b\"]: %w", err)
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("tokenizer: model.merges[%d] has %d tokens, want a pair", i, len(p))
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

func (t *refTokenizer) refBuildTables() {
	strs := make([]string, t.vocabSize)
	has := make([]bool, t.vocabSize)
	copy(strs, t.tokenStrings)
	copy(has, t.hasToken)
	for _, a := range t.added {
		strs[a.id], has[a.id] = a.content, true
	}
	t.tokenStrings, t.hasToken = strs, has
	specialText := make(map[string]bool)
	for _, a := range t.added {
		if a.special {
			specialText[a.content] = true
		}
	}
	t.decodeBytes = make([][]byte, t.vocabSize)
	t.skipOnSpecial = make([]bool, t.vocabSize)
	for id := range strs {
		if !has[id] {
			continue
		}
		t.decodeBytes[id] = refByteLevelDecode(strs[id])
		t.skipOnSpecial[id] = specialText[strs[id]]
	}
	t.rawVocab = make(map[string]int, len(t.vocab))
	for s, id := range t.vocab {
		if b, ok := refByteLevelBytes(s); ok {
			t.rawVocab[string(b)] = id
		}
	}
	for b := range 256 {
		t.byteID[b] = -1
		if id, ok := t.vocab[string(byteToRune[b])]; ok {
			t.byteID[b] = id
		}
	}
}

func refByteLevelBytes(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return nil, false
		}
		out = append(out, byte(runeToByte[r]))
	}
	return out, true
}

func refByteLevelDecode(s string) []byte {
	if b, ok := refByteLevelBytes(s); ok {
		return b
	}
	return []byte(s)
}

// sameTables reports how the tables of a fast-path tokenizer differ from the
// reference's, or "" if they agree.
func sameTables(got *Tokenizer, want *refTokenizer) string {
	var diffs []string
	check := func(name string, ok bool) {
		if !ok {
			diffs = append(diffs, name)
		}
	}
	vocabOK := got.vocab.len() == len(want.vocab)
	for s, id := range want.vocab {
		if v, ok := got.vocab.get(s); !ok || v != id {
			vocabOK = false
		}
		if v, ok := got.vocab.getBytes([]byte(s)); !ok || v != id {
			vocabOK = false
		}
	}
	got.vocab.all(func(s string, id int) bool {
		if v, ok := want.vocab[s]; !ok || v != id {
			vocabOK = false
		}
		return true
	})
	check("vocab", vocabOK)
	mergesOK := true
	n := 0
	for _, s := range got.merges.slots {
		if s.key != 0 {
			n++
			if m, ok := want.merges[s.key-1]; !ok || m != s.m {
				mergesOK = false
			}
		}
	}
	for k, m := range want.merges {
		if g, ok := got.merges.get(k); !ok || g != m {
			mergesOK = false
		}
	}
	check("merges", mergesOK && n == len(want.merges))
	check("byteID", got.byteID == want.byteID)
	check("ignoreMerges", got.ignoreMerges == want.ignoreMerges)
	check("unkID", got.unkID == want.unkID)
	check("fuseUnk", got.fuseUnk == want.fuseUnk)
	check("splitGLM", got.splitGLM == want.splitGLM)
	check("addPrefixSpace", got.addPrefixSpace == want.addPrefixSpace)
	check("added", reflect.DeepEqual(got.added, want.added))
	check("addedByID", maps.Equal(got.addedByID, want.addedByID))
	check("addedByText", maps.Equal(got.addedByText, want.addedByText))
	check("rawTrie", reflect.DeepEqual(got.rawTrie, want.rawTrie))
	check("normTrie", reflect.DeepEqual(got.normTrie, want.normTrie))
	check("vocabSize", got.vocabSize == want.vocabSize)
	check("tokenStrings", reflect.DeepEqual(got.tokenStrings, want.tokenStrings))
	check("hasToken", reflect.DeepEqual(got.hasToken, want.hasToken))
	check("skipOnSpecial", reflect.DeepEqual(got.skipOnSpecial, want.skipOnSpecial))
	// The fast path decodes tokens when they are used instead of keeping
	// decodeBytes.
	decodeOK := len(got.hasToken) == len(want.decodeBytes)
	for id := 0; decodeOK && id < len(want.decodeBytes); id++ {
		b, ok := got.TokenBytes(id)
		decodeOK = ok == (want.decodeBytes[id] != nil) && bytes.Equal(b, want.decodeBytes[id]) &&
			bytes.Equal(got.appendToken(nil, id, false), want.decodeBytes[id])
	}
	check("decodeBytes", decodeOK)
	// The fast path looks words up by their byte-level form instead of
	// keeping rawVocab.
	n = 0
	got.vocab.all(func(s string, _ int) bool {
		if _, ok := refByteLevelBytes(s); ok {
			n++
		}
		return true
	})
	rawOK := n == len(want.rawVocab)
	for raw, id := range want.rawVocab {
		if v, ok := got.vocab.getBytes(appendByteLevel(nil, []byte(raw))); !ok || v != id {
			rawOK = false
		}
	}
	check("rawVocab", rawOK)
	return strings.Join(diffs, ", ")
}

// mergesAsStrings rewrites the merges of a tokenizer.json from pairs to the
// "a b" form.
func mergesAsStrings(t testing.TB, data []byte) []byte {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var model map[string]json.RawMessage
	if err := json.Unmarshal(doc["model"], &model); err != nil {
		t.Fatal(err)
	}
	var pairs [][2]string
	if err := json.Unmarshal(model["merges"], &pairs); err != nil {
		t.Fatal(err)
	}
	strs := make([]string, len(pairs))
	for i, p := range pairs {
		strs[i] = p[0] + " " + p[1]
	}
	model["merges"] = mustMarshal(t, strs)
	doc["model"] = mustMarshal(t, model)
	return mustMarshal(t, doc)
}

// TestFastMatchesReference checks that Parse builds exactly the tables of the
// encoding/json implementation on the fixture (both merge forms, and the
// variants of the oracle cases).
func TestFastMatchesReference(t *testing.T) {
	fixture, err := os.ReadFile(fixtures.Path(t, "glm52-mini", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string][]byte{
		"fixture":                fixture,
		"fixture, string merges": mergesAsStrings(t, fixture),
		"tiny":                   []byte(tinyJSON),
		"tiny, duplicate keys":   []byte(strings.Replace(tinyJSON, `"vocab": {"a": 0,`, `"vocab": {"a": -1, "<unk>": 9, "a": 0, "ab": 99999999,`, 1)),
		"tiny, shared id":        []byte(strings.NewReplacer(`"vocab": {"a": 0,`, `"vocab": {"zz": 4, "a": 0,`, `"id": 5,`, `"id": 6,`).Replace(tinyJSON)),
	}
	golden, err := os.ReadFile("testdata/oracle-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var oracle struct {
		Variants []struct {
			Name  string                     `json:"name"`
			Patch map[string]json.RawMessage `json:"patch"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(golden, &oracle); err != nil {
		t.Fatal(err)
	}
	for _, v := range oracle.Variants {
		inputs["variant "+v.Name] = patchJSON(t, fixture, v.Patch)
	}
	checkMatchesReference(t, inputs)
}

// TestFastMatchesReferenceLarge does the same on synthetic vocabularies as
// large as GLM-5.2's, in both layouts.
func TestFastMatchesReferenceLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and parses two 9 MB tokenizer.json files twice; skipped with -short")
	}
	checkMatchesReference(t, map[string][]byte{
		"synthetic 154k":            syntheticTokenizer(t, 154_000, false),
		"synthetic 154k, HF layout": syntheticTokenizer(t, 154_000, true),
	})
}

func checkMatchesReference(t *testing.T, inputs map[string][]byte) {
	t.Helper()
	for name, data := range inputs {
		got, err := Parse(data)
		if err != nil {
			t.Errorf("%s: Parse: %v", name, err)
			continue
		}
		want, err := parseReference(data)
		if err != nil {
			t.Errorf("%s: reference: %v", name, err)
			continue
		}
		if d := sameTables(got, want); d != "" {
			t.Errorf("%s: tables differ from the encoding/json reference: %s", name, d)
		}
	}
}
