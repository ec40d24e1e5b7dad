package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzAppendString checks that appendString accepts exactly the JSON strings
// encoding/json accepts and decodes them to the same value.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{
		``, `abc`, `Ġthe`, `\"\\\/\b\f\n\r\t`, `\u0041\u00e9\u4e2d`, `\ud83d\ude00`, `\ud800`, `\ud800x`,
		`\udc00\ud800\u0041`, `\ud800\ud800\udc00`, `\ud83d\u0041`, "a\xffb", "\xc3", "\xe4\xb8", "\xed\xa0\x80",
		"\xef\xbf\xbd", `\u12`, `\x`, "\t", `\'`, `a"b`, `\`, `\uD83D\uDE00`, `\u00`, "中文\\n",
		"0123456789abcdef\"tail", "0123456\\n89abcdef", "ĠĠĠĠĠĠĠĠĠĠĠĠ\x01", "abcdefghijklmnopq\xffrstuvwxyz", "~~~~~~~~\x7f\x80",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		data := []byte(`"` + s + `"`)
		got, end, err := appendString([]byte("prefix"), data, 0)
		var want string
		if err != nil {
			if json.Unmarshal(data, &want) == nil {
				t.Fatalf("appendString(%q) failed (%v); encoding/json decodes %q", data, err, want)
			}
			return
		}
		if !bytes.HasPrefix(got, []byte("prefix")) {
			t.Fatalf("appendString(%q) did not append: %q", data, got)
		}
		if err := json.Unmarshal(data[:end], &want); err != nil {
			t.Fatalf("appendString(%q) accepted %q, encoding/json: %v", data, data[:end], err)
		}
		if string(got[len("prefix"):]) != want {
			t.Fatalf("appendString(%q) = %q, encoding/json gives %q", data[:end], got[len("prefix"):], want)
		}
		if e2, err := skipString(data, 0); err != nil || e2 != end {
			t.Fatalf("skipString(%q) = %d, %v; appendString ended at %d", data, e2, err, end)
		}
	})
}

// FuzzSkipValue checks that skipValue accepts exactly the JSON values
// encoding/json accepts.
func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{
		`null`, `true`, `false`, `0`, `-0`, `1.5e+3`, `01`, `1.`, `-`, `1e`, `"a"`, `[]`, `{}`, `[1, "x", {"a": [null]}]`,
		`{"a":1,}`, `[1,]`, `{"a" 1}`, `{1: 2}`, `[`, `"\u00zz"`, ` [ 1 , 2 ] `, `nul`, `{"a":{"b":{"c":[[[]]]}}}`,
		"[\n          1,\n          \"x\"\n        ]", "{\"k\":\n    \t   \r\n           []}", "[1,                 \v2]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		end, err := skipValue(data, skipWS(data, 0), 1)
		got := err == nil && skipWS(data, end) == len(data)
		if want := json.Valid(data); got != want {
			t.Fatalf("skipValue(%q): valid = %v (err %v), json.Valid = %v", data, got, err, want)
		}
	})
}

// FuzzReadInt checks readInt against decoding into an int with encoding/json.
func FuzzReadInt(f *testing.F) {
	for _, s := range []string{`0`, `-0`, `42`, `-7`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775808`,
		`-9223372036854775809`, `99999999999999999999`, `1.0`, `1e3`, `01`, `-`, `"1"`, `true`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want int
		werr := json.Unmarshal(data, &want)
		if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
			return // the vocabulary decoder handles null itself
		}
		n, end, err := readInt(data, skipWS(data, 0))
		if sn, send, ok := smallInt(data, skipWS(data, 0)); ok && (err != nil || sn != n || send != end) {
			t.Fatalf("smallInt(%q) = %d, %d; readInt gives %d, %d, %v", data, sn, send, n, end, err)
		}
		if err != nil || skipWS(data, end) != len(data) {
			if werr == nil && err != nil {
				t.Fatalf("readInt(%q) failed (%v); encoding/json decodes %d", data, err, want)
			}
			return
		}
		if werr != nil || n != want {
			t.Fatalf("readInt(%q) = %d; encoding/json gives %d, %v", data, n, want, werr)
		}
	})
}

// knownRejection reports whether err is one of the cases where Parse rejects
// a file the encoding/json reference accepts: keys that encoding/json would
// merge (case variants, repeated keys).
func knownRejection(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "appears twice") || strings.Contains(msg, `only "model" is accepted`) ||
		strings.Contains(msg, `only "vocab" and "merges" are accepted`)
}

// FuzzParseMatchesReference feeds hostile tokenizer.json files to Parse and
// to the encoding/json reference: when Parse accepts a file, the reference
// must accept it and build the same tables; when only the reference accepts
// it, Parse's error must be one of the documented rejections.
func FuzzParseMatchesReference(f *testing.F) {
	f.Add([]byte(tinyJSON))
	for _, r := range [][2]string{
		{`"merges": ["a b"]`, `"merges": [["a", "b"]]`},
		{`"merges": ["a b"]`, `"merges": [["a", "b"], null, ["a"], ["a", null], ["a", "b", "c"]]`},
		{`"merges": ["a b"]`, `"merges": ["a b", null, "ab"]`},
		{`"merges": ["a b"]`, `"merges": [null]`},
		{`"merges": ["a b"]`, `"merges": ["a b", ["a", "b"]]`},
		{`"merges": ["a b"]`, `"merges": []`},
		{`"merges": ["a b"]`, `"merges": null`},
		{`"merges": ["a b"]`, `"merges": "a b"`},
		{`"merges": ["a b"]`, `"merges": ["\u0061 \u0062", "a\u0020b"]`},
		{`"b": 1, "ab": 2`, `"b": 1, "\u0061b": 2, "\ud83d\ude00": 6, "\ud800": 7, "a\"b": 8`},
		{`"b": 1`, `"b": null, "b": 1, "a": 0`},
		{`"b": 1`, `"b": 1.5`},
		{`"b": 1`, `"b": "1"`},
		{`"b": 1`, `"b": -1e2`},
		{`"vocab"`, `"Vocab": {"x": 0}, "vocab"`},
		{`"vocab"`, `"voc\u0061b"`},
		{`"model"`, `"Model": null, "model"`},
		{`"ignore_merges": false`, `"ignore_merges": true`},
		{`"version": "1.0"`, `"model": null, "version": "1.0"`},
	} {
		f.Add([]byte(strings.Replace(tinyJSON, r[0], r[1], 1)))
	}
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"model": {"vocab": {"a": 0}}} x`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Parse(data)
		want, werr := parseReference(data)
		switch {
		case err != nil && werr == nil:
			if !knownRejection(err) {
				t.Fatalf("Parse: %v; the reference accepts the file", err)
			}
		case err == nil && werr != nil:
			t.Fatalf("Parse accepts the file; the reference: %v", werr)
		case err == nil:
			if d := sameTables(got, want); d != "" {
				t.Fatalf("tables differ from the reference: %s", d)
			}
		}
	})
}

func TestSplitDocument(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		keys    []string
		ids     []int
		merges  [][2]string
		rest    string
		wantErr string
	}{
		{
			name: "pairs", data: `{"a": 1, "model": {"x": [], "vocab": {"a": 0, "b": null}, "merges": [["a", "b"]]}}`,
			keys: []string{"a", "b"}, ids: []int{0, 0}, merges: [][2]string{{"a", "b"}},
			rest: `{"a": 1, "model": {"x": [], "vocab": null, "merges": null}}`,
		},
		{
			name: "strings with escapes", data: `{"model":{"merges":["\u0120 t","a\u00e9 \ud83d\ude00"],"vocab":{"\n":-3}}}`,
			keys: []string{"\n"}, ids: []int{-3}, merges: [][2]string{{"\u0120", "t"}, {"aé", "😀"}},
			rest: `{"model":{"merges":null,"vocab":null}}`,
		},
		{name: "not an object", data: `[1]`, rest: `[1]`},
		{name: "model not an object", data: `{"model": "x"}`, rest: `{"model": "x"}`},
		{name: "null hot values", data: `{"model": {"vocab": null, "merges": null}}`, rest: `{"model": {"vocab": null, "merges": null}}`},
		{name: "twice", data: `{"model": {"vocab": {}, "vocab": {}}}`, wantErr: `"vocab" appears twice`},
		{name: "case", data: `{"model": {"VOCAB": {}}}`, wantErr: `model key "VOCAB"`},
		{name: "model twice", data: `{"model": {}, "model": {}}`, wantErr: `"model" appears twice`},
		{name: "model case", data: `{"Model": {}}`, wantErr: `top-level key "Model"`},
		{name: "bad id", data: `{"model": {"vocab": {"a": 1.5}}}`, wantErr: `model.vocab["a"]: id 1.5 is not an integer`},
		{name: "string id", data: `{"model": {"vocab": {"a": "1"}}}`, wantErr: `want an integer id, found a string`},
		{name: "huge id", data: `{"model": {"vocab": {"a": 123456789012345678901}}}`, wantErr: "overflows"},
		{name: "vocab array", data: `{"model": {"vocab": []}}`, wantErr: "want an object for model.vocab"},
		{name: "truncated", data: `{"model": {"vocab": {"a": 1`, wantErr: "unexpected end of input"},
		{name: "bad escape", data: `{"model": {"merges": ["a\q b"]}}`, wantErr: "valid escape character"},
		{name: "control character", data: "{\"model\": {\"merges\": [\"a\tb\"]}}", wantErr: "control character"},
		{name: "deep", data: `{"x": ` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, wantErr: "exceeded max depth"},
	}
	for _, tt := range tests {
		doc, err := splitDocument([]byte(tt.data))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var keys []string
		for k := range doc.vocab.len() {
			keys = append(keys, doc.vocab.key(k))
		}
		var merges [][2]string
		for k := range doc.merges.len() {
			a, b, ab := doc.merges.pair(k)
			if string(ab) != string(a)+string(b) {
				t.Errorf("%s: merge %d: %q is not %q + %q", tt.name, k, ab, a, b)
			}
			merges = append(merges, [2]string{string(a), string(b)})
		}
		if !slices.Equal(keys, tt.keys) || !slices.Equal(doc.vocab.ids, tt.ids) || !slices.Equal(merges, tt.merges) || string(doc.rest) != tt.rest {
			t.Errorf("%s: got keys %q ids %v merges %q rest %s\nwant keys %q ids %v merges %q rest %s",
				tt.name, keys, doc.vocab.ids, merges, doc.rest, tt.keys, tt.ids, tt.merges, tt.rest)
		}
	}
}

func TestMergeListErrors(t *testing.T) {
	tests := []struct {
		merges string
		want   string // "" for no error
		typ    bool   // a type error rather than a shape error
	}{
		{`["a b", "c d"]`, "", false},
		{`["a b c"]`, `model.merges[0] = "a b c": want two tokens`, false},
		{`["ab"]`, `model.merges[0] = "ab": want two tokens`, false},
		{`["a b", null]`, `model.merges[1] = "": want two tokens`, false},
		{`["a b", ["a", "b"]]`, `model.merges[1] is an array, not a string`, true},
		{`[["a", "b"], ["a"]]`, `model.merges[1] has 1 tokens, want a pair`, false},
		{`[["a"], ["a", 5]]`, `model.merges[1] is a number, not a list of strings`, true},
		{`[null]`, `model.merges[0] has 0 tokens`, false},
		{`[["a", "b"], "a b"]`, `model.merges[1] is a string, not a pair`, true},
		{`[{}]`, `model.merges[0] is an object, not a pair`, true},
	}
	for _, tt := range tests {
		var m mergeList
		data := []byte(tt.merges)
		end, err := m.decode(data, 0)
		if err != nil || end != len(data) {
			t.Errorf("%s: decode = %d, %v", tt.merges, end, err)
			continue
		}
		err = errors.Join(m.typeErr, m.shapeErr)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.merges, err)
			}
			continue
		}
		first := m.shapeErr
		if tt.typ {
			first = m.typeErr
		}
		if first == nil || !strings.Contains(first.Error(), tt.want) {
			t.Errorf("%s: errors %v, want one containing %q", tt.merges, err, tt.want)
		}
	}
}
