package tokenizer

import (
	"bytes"
	"strings"
	"testing"
)

func TestSyntheticJSON(t *testing.T) {
	specials := []string{"<|endoftext|>", "<|user|>", "<|observation|>"}
	for _, normal := range []int{256, 300, 2045, 154820} {
		data, err := SyntheticJSON(normal, specials)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := Parse(data)
		if err != nil {
			t.Fatalf("normal %d: %v", normal, err)
		}
		if got, want := tok.VocabSize(), normal+len(specials); got != want {
			t.Fatalf("normal %d: vocabulary %d, want %d", normal, got, want)
		}
		for i, s := range specials {
			if id, ok := tok.TokenID(s); !ok || id != normal+i {
				t.Errorf("normal %d: %q is id %d (%v), want %d", normal, s, id, ok, normal+i)
			}
		}
		text := "Hello, world! the quick brown fox jumps over the lazy dog 12345 \u00e9\u4e16<|user|>"
		ids := tok.Encode(text)
		if got := tok.Decode(ids, false); got != text {
			t.Errorf("normal %d: round trip %q, want %q", normal, got, text)
		}
		if last := ids[len(ids)-1]; last != normal+1 {
			t.Errorf("normal %d: <|user|> encodes to %d, want %d", normal, last, normal+1)
		}
		plain := "the quick brown fox jumps over the lazy dog"
		if n := len(tok.Encode(plain)); normal >= 2045 && n > len(plain)*3/5 {
			t.Errorf("normal %d: %d ids for %d bytes of lowercase text: the merges do not apply", normal, n, len(plain))
		}
		again, err := SyntheticJSON(normal, specials)
		if err != nil || !bytes.Equal(again, data) {
			t.Errorf("normal %d: a second call differs (%v)", normal, err)
		}
	}
}

func TestSyntheticJSONRefuses(t *testing.T) {
	for _, tc := range []struct {
		normal   int
		specials []string
		want     string
	}{
		{255, nil, "256 byte tokens"},
		{300, []string{"<a>", "<a>"}, "repeated"},
		{300, []string{""}, "empty"},
		{300, []string{"a"}, "vocabulary token"},
	} {
		_, err := SyntheticJSON(tc.normal, tc.specials)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SyntheticJSON(%d, %q) = %v, want an error saying %q", tc.normal, tc.specials, err, tc.want)
		}
	}
}
