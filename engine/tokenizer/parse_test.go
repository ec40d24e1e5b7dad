package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tinyJSON is a minimal byte-level BPE tokenizer.json with the GLM
// pre-tokenizer; most bytes are missing from its vocabulary.
const tinyJSON = `{
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [{"id": 5, "content": "<x>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
  "post_processor": null,
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null,
    "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
    "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "<unk>": 4}, "merges": ["a b"]}
}`

// patchTiny returns tinyJSON with the JSON value at a path (top-level key,
// then keys of nested objects) replaced.
func patchTiny(t *testing.T, value string, path ...string) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(tinyJSON), &doc); err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		t.Fatalf("bad patch value %s: %v", value, err)
	}
	m := doc
	for _, k := range path[:len(path)-1] {
		m = m[k].(map[string]any)
	}
	m[path[len(path)-1]] = v
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUnknownCharacters checks unk_token and fuse_unk against HF tokenizers
// 0.23.2 on "a!!b a<x>ab" (the "!" byte is not in the vocabulary).
func TestUnknownCharacters(t *testing.T) {
	tests := []struct {
		unk, fuse  string
		ids        []int
		decoded    string
		decodedSkp string
	}{
		{"null", "false", []int{0, 1, 3, 0, 5, 2}, "ab a<x>ab", "ab aab"},
		{`"<unk>"`, "false", []int{0, 4, 4, 1, 3, 0, 5, 2}, "a<unk><unk>b a<x>ab", "a<unk><unk>b aab"},
		{`"<unk>"`, "true", []int{0, 4, 1, 3, 0, 5, 2}, "a<unk>b a<x>ab", "a<unk>b aab"},
	}
	for _, tt := range tests {
		var doc map[string]any
		if err := json.Unmarshal(patchTiny(t, tt.unk, "model", "unk_token"), &doc); err != nil {
			t.Fatal(err)
		}
		doc["model"].(map[string]any)["fuse_unk"] = tt.fuse == "true"
		data, _ := json.Marshal(doc)
		tok, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		got := tok.Encode("a!!b a<x>ab")
		if !slices.Equal(got, tt.ids) {
			t.Errorf("unk=%s fuse=%s: Encode = %v, want %v", tt.unk, tt.fuse, got, tt.ids)
		}
		if d := tok.Decode(tt.ids, false); d != tt.decoded {
			t.Errorf("unk=%s fuse=%s: Decode = %q, want %q", tt.unk, tt.fuse, d, tt.decoded)
		}
		if d := tok.Decode(tt.ids, true); d != tt.decodedSkp {
			t.Errorf("unk=%s fuse=%s: Decode(skip) = %q, want %q", tt.unk, tt.fuse, d, tt.decodedSkp)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"not json", []byte("{"), "parse tokenizer.json"},
		{"truncation", patchTiny(t, `{"max_length": 8}`, "truncation"), "truncation"},
		{"padding", patchTiny(t, `{"strategy": "BatchLongest"}`, "padding"), "padding"},
		{"normalizer", patchTiny(t, `{"type": "NFC"}`, "normalizer"), `normalizer type "NFC"`},
		{"no decoder", patchTiny(t, `null`, "decoder"), "decoder is null"},
		{"decoder type", patchTiny(t, `{"type": "WordPiece"}`, "decoder"), `decoder type "WordPiece"`},
		{"no pre-tokenizer", patchTiny(t, `null`, "pre_tokenizer"), "pre_tokenizer is null"},
		{"pre-tokenizer type", patchTiny(t, `{"type": "Whitespace"}`, "pre_tokenizer"), `type "Whitespace" is not supported`},
		{"split regex", patchTiny(t, `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated"}, {"type": "ByteLevel"}]}`, "pre_tokenizer"), `regex "\\s+" is not supported`},
		{"split string", patchTiny(t, `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated"}, {"type": "ByteLevel"}]}`, "pre_tokenizer"), "only a Regex pattern"},
		{"split behavior", patchTiny(t, `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "`+jsonEscape(glmPattern)+`"}, "behavior": "Removed"}, {"type": "ByteLevel"}]}`, "pre_tokenizer"), `behavior "Removed"`},
		{"after byte level", patchTiny(t, `{"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "ByteLevel"}]}`, "pre_tokenizer"), "steps after ByteLevel"},
		{"no byte level", patchTiny(t, `{"type": "Sequence", "pretokenizers": []}`, "pre_tokenizer"), "no ByteLevel step"},
		{"use_regex", patchTiny(t, `{"type": "ByteLevel", "use_regex": true}`, "pre_tokenizer"), "use_regex=true"},
		{"model type", patchTiny(t, `"WordPiece"`, "model", "type"), `model type "WordPiece"`},
		{"byte fallback", patchTiny(t, `true`, "model", "byte_fallback"), "byte_fallback"},
		{"dropout", patchTiny(t, `0.1`, "model", "dropout"), "dropout"},
		{"subword prefix", patchTiny(t, `"##"`, "model", "continuing_subword_prefix"), "continuing_subword_prefix"},
		{"unk missing", patchTiny(t, `"<nope>"`, "model", "unk_token"), `unk_token "<nope>" is not in the vocabulary`},
		{"empty vocab", patchTiny(t, `{}`, "model", "vocab"), "vocab is empty"},
		{"negative id", patchTiny(t, `{"a": -1}`, "model", "vocab"), "outside"},
		{"huge id", patchTiny(t, `{"a": 123456789}`, "model", "vocab"), "sparse vocabularies"},
		{"merge token", patchTiny(t, `["a c"]`, "model", "merges"), `token "c" is not in the vocabulary`},
		{"merge result", patchTiny(t, `["b a"]`, "model", "merges"), `merged token "ba"`},
		{"merge format", patchTiny(t, `["a b c"]`, "model", "merges"), "two tokens separated by one space"},
		{"merge pair", patchTiny(t, `[["a"]]`, "model", "merges"), "has 1 tokens, want a pair"},
		{"merge mixed", patchTiny(t, `["a b", ["a", "b"]]`, "model", "merges"), "parse model.merges"},
		{"added id", patchTiny(t, `[{"id": 9, "content": "<x>", "special": true}]`, "added_tokens"), "HF tokenizers would assign id 5"},
		{"added in vocab", patchTiny(t, `[{"id": 7, "content": "ab"}]`, "added_tokens"), "would assign id 2"},
		{"added twice", patchTiny(t, `[{"id": 5, "content": "<x>"}, {"id": 6, "content": "<x>"}]`, "added_tokens"), "appears twice"},
		{"added empty", patchTiny(t, `[{"id": 5, "content": ""}]`, "added_tokens"), "content is empty"},
		{"added no id", patchTiny(t, `[{"content": "<y>"}]`, "added_tokens"), "id is missing"},
		{"bad id kept", []byte(strings.Replace(tinyJSON, `"ab": 2,`, `"ab": 2, "ab": -5,`, 1)), `token "ab" has id -5`},
	}
	for _, tt := range tests {
		_, err := Parse(tt.data)
		if err == nil {
			t.Errorf("%s: Parse succeeded, want an error containing %q", tt.name, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q does not contain %q", tt.name, err, tt.want)
		}
	}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"tiny", []byte(tinyJSON)},
		{"merge pairs", patchTiny(t, `[["a", "b"]]`, "model", "merges")},
		{"post processor", patchTiny(t, `{"type": "ByteLevel", "trim_offsets": false}`, "post_processor")},
		{"template processor", patchTiny(t, `{"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {}}`, "post_processor")},
		{"empty normalizer sequence", patchTiny(t, `{"type": "Sequence", "normalizers": []}`, "normalizer")},
		{"byte level alone", patchTiny(t, `{"type": "ByteLevel"}`, "pre_tokenizer")},
		{"bad id replaced", []byte(strings.Replace(tinyJSON, `"ab": 2,`, `"ab": -5, "ab": 2,`, 1))},
	}
	for _, tt := range tests {
		tok, err := Parse(tt.data)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got := tok.Encode("ab"); !slices.Equal(got, []int{2}) {
			t.Errorf("%s: Encode(\"ab\") = %v, want [2]", tt.name, got)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Load(%q) error = %v, want one naming the file", path, err)
	}
}

// TestMergePathsAgree checks that the short-word (rescan) and long-word
// (priority queue) merge paths give the same result on every word.
func TestMergePathsAgree(t *testing.T) {
	tok := loadFixture(t)
	words := []string{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", " the", "ing", "Hello", "   ", "中文测试"}
	data, err := os.ReadFile("testdata/oracle-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Variants []struct {
			Cases []textCase `json:"cases"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	for _, c := range golden.Variants[0].Cases {
		words = append(words, c.Text) // long runs of bytes
		for i := 0; i < len(c.Text); {
			j := glmMatchEnd(c.Text, i)
			words = append(words, c.Text[i:j])
			i = j
		}
	}
	var sc bpeScratch
	for _, w := range words {
		if w == "" {
			continue
		}
		var syms []int
		for _, b := range []byte(w) {
			syms = append(syms, tok.byteID[b])
		}
		a := tok.mergeScan(nil, slices.Clone(syms), &sc)
		b := tok.mergeHeap(nil, slices.Clone(syms), &sc)
		if !slices.Equal(a, b) {
			t.Errorf("%q: rescan gives %v, priority queue gives %v", w, a, b)
		}
	}
}
