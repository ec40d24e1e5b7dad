package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spoolhq/spool/internal/fixtures"
)

// FuzzRoundTrip checks decode(encode(s)) == s for valid UTF-8 s, that the
// stream decoder agrees with Decode, and that invalid UTF-8 never panics and
// decodes to valid UTF-8.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{
		"", "Hello, world!", "  leading\t\ttabs\n\n", "it's they're CAPS'LL 'ſ",
		"中文测试，混合 English 🚀👨‍👩‍👧", "[gMASK]<sop><|user|>\nhi<|assistant|>\n<think></think>\n",
		"<tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>", "trailing   ", "\r\n\r\nx",
		"1234567 3.14159 ²½Ⅻ", "\u00a0\u3000\u2028\u0085 x", "\xff\xfe", "a\xe4\xb8b", "\U00013460\U00010D40",
	} {
		f.Add(s)
	}
	tok, err := Load(fixtures.Path(f, "glm52-mini", "tokenizer.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		got := tok.Decode(ids, false)
		if utf8.ValidString(s) && got != s {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, got, ids)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Decode(Encode(%q)) = %q is not valid UTF-8", s, got)
		}
		for _, skip := range []bool{false, true} {
			d := tok.NewStreamDecoder(skip)
			var sb strings.Builder
			for _, id := range ids {
				sb.WriteString(d.Add(id))
			}
			sb.WriteString(d.Flush())
			if want := tok.Decode(ids, skip); sb.String() != want {
				t.Fatalf("skip=%v: stream %q != Decode %q for ids %v", skip, sb.String(), want, ids)
			}
		}
	})
}

// FuzzParse feeds hostile tokenizer.json files to Parse: it must return an
// error or a tokenizer that encodes and decodes without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte(tinyJSON))
	f.Add([]byte(strings.Replace(tinyJSON, `"merges": ["a b"]`, `"merges": [["a", "b"], ["ab", "ab"]]`, 1)))
	f.Add([]byte(strings.Replace(tinyJSON, `"single_word": false, "lstrip": false, "rstrip": false`, `"single_word": true, "lstrip": true, "rstrip": true`, 1)))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}`))
	f.Add([]byte(`{"added_tokens": [{"id": 1, "content": "x"}], "model": {"type": "BPE", "vocab": {"a": 0}, "unk_token": "a", "fuse_unk": true}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true}, "decoder": {"type": "ByteLevel"}}`))
	f.Add([]byte(`{"model": null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data)
		if err != nil {
			return
		}
		for _, s := range []string{"", "ab a<x>ab", "a!! b\n\n  x", "\xff<x>", "'s 12345"} {
			ids := tok.Encode(s)
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("Encode(%q) produced id %d outside [0, %d)", s, id, tok.VocabSize())
				}
			}
			tok.Decode(append(ids, -1, tok.VocabSize()), true)
			d := tok.NewStreamDecoder(false)
			for _, id := range ids {
				d.Add(id)
			}
			d.Flush()
		}
		for id := -1; id <= tok.VocabSize(); id++ {
			tok.TokenString(id)
			tok.IsSpecial(id)
		}
	})
}
