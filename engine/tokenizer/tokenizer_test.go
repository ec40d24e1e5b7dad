package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/spoolhq/spool/internal/fixtures"
)

func loadFixture(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Load(fixtures.Path(t, "glm52-mini", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type textCase struct {
	Text    string `json:"text"`
	IDs     []int  `json:"ids"`
	Decoded string `json:"decoded"`
}

func readCases(t *testing.T, path string) []textCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []textCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(f.Cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return f.Cases
}

func checkCases(t *testing.T, tok *Tokenizer, cases []textCase) {
	t.Helper()
	for i, c := range cases {
		got := tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("case %d: Encode(%q)\n got %v\nwant %v", i, c.Text, got, c.IDs)
			continue
		}
		if d := tok.Decode(c.IDs, false); d != c.Decoded {
			t.Errorf("case %d: Decode(%v) = %q, want %q", i, c.IDs, d, c.Decoded)
		}
	}
}

func TestFixtureCases(t *testing.T) {
	tok := loadFixture(t)
	checkCases(t, tok, readCases(t, fixtures.Path(t, "tokenizer-cases.json")))
}

type oracleCase struct {
	textCase
	DecodedSkip string `json:"decoded_skip"`
}

// TestOracleCases compares against testdata/oracle-cases.json: random texts
// encoded and decoded by HF tokenizers 0.23.2 (see testdata/gen_oracle.js),
// with the fixture tokenizer and with variants of it that exercise added-token
// flags and other pre-tokenizer and model options.
func TestOracleCases(t *testing.T) {
	fixture, err := os.ReadFile(fixtures.Path(t, "glm52-mini", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/oracle-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Variants []struct {
			Name  string                     `json:"name"`
			Patch map[string]json.RawMessage `json:"patch"`
			Cases []oracleCase               `json:"cases"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	for _, v := range golden.Variants {
		t.Run(v.Name, func(t *testing.T) {
			tok, err := Parse(patchJSON(t, fixture, v.Patch))
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i, c := range v.Cases {
				got := tok.Encode(c.Text)
				switch {
				case !slices.Equal(got, c.IDs):
					t.Errorf("case %d: Encode(%q)\n got %v\nwant %v", i, c.Text, got, c.IDs)
				case tok.Decode(c.IDs, false) != c.Decoded:
					t.Errorf("case %d: Decode(%v, false) = %q, want %q", i, c.IDs, tok.Decode(c.IDs, false), c.Decoded)
				case tok.Decode(c.IDs, true) != c.DecodedSkip:
					t.Errorf("case %d: Decode(%v, true) = %q, want %q", i, c.IDs, tok.Decode(c.IDs, true), c.DecodedSkip)
				default:
					continue
				}
				if bad++; bad == 10 {
					t.Fatal("too many mismatches")
				}
			}
		})
	}
}

// patchJSON replaces top-level fields of a tokenizer.json (and, for "model",
// fields of the model object).
func patchJSON(t *testing.T, data []byte, patch map[string]json.RawMessage) []byte {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for k, v := range patch {
		if k != "model" {
			doc[k] = v
			continue
		}
		var model, fields map[string]json.RawMessage
		if err := json.Unmarshal(doc["model"], &model); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(v, &fields); err != nil {
			t.Fatal(err)
		}
		for fk, fv := range fields {
			model[fk] = fv
		}
		doc["model"] = mustMarshal(t, model)
	}
	return mustMarshal(t, doc)
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChatMarkers encodes the GLM-5.2 chat prefix: every marker must become
// its added-token id, never BPE pieces.
func TestChatMarkers(t *testing.T) {
	tok := loadFixture(t)
	id := func(s string) int {
		t.Helper()
		v, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("TokenID(%q) not found", s)
		}
		return v
	}
	nl, hi := 198, 3758 // "\n" and "hi" (HF tokenizers 0.23.2)
	text := "[gMASK]<sop><|user|>\nhi<|assistant|>\n<think></think>\n"
	want := []int{id("[gMASK]"), id("<sop>"), id("<|user|>"), nl, hi, id("<|assistant|>"), nl, id("<think>"), id("</think>"), nl}
	if !slices.Equal(want, []int{8171, 8173, 8176, 198, 3758, 8177, 198, 8181, 8182, 198}) {
		t.Fatalf("marker ids %v differ from the fixture's added_tokens", want)
	}
	if got := tok.Encode(text); !slices.Equal(got, want) {
		t.Fatalf("Encode(%q)\n got %v\nwant %v", text, got, want)
	}
	if got := tok.Decode(want, false); got != text {
		t.Errorf("Decode(skipSpecial=false) = %q, want %q", got, text)
	}
	// Special control tokens are dropped; content markers stay renderable.
	if got, want := tok.Decode(want, true), "\nhi\n<think></think>\n"; got != want {
		t.Errorf("Decode(skipSpecial=true) = %q, want %q", got, want)
	}
}

func TestTokenLookups(t *testing.T) {
	tok := loadFixture(t)
	if got := tok.VocabSize(); got != 8192 {
		t.Errorf("VocabSize() = %d, want 8192", got)
	}
	tests := []struct {
		token   string
		id      int
		special bool
	}{
		{"<|endoftext|>", 8169, true},
		{"[gMASK]", 8171, true},
		{"<sop>", 8173, true},
		{"<|user|>", 8176, true},
		{"<|assistant|>", 8177, true},
		{"<|observation|>", 8178, true},
		{"<think>", 8181, false},
		{"</think>", 8182, false},
		{"<tool_call>", 8183, false},
		{"<arg_key>", 8187, false},
		{"/nothink", 8191, false},
		{"!", 0, false},
		{"Ċ", 198, false}, // "\n" in byte-level form
		{"Ġ", 220, false}, // " "
	}
	for _, tt := range tests {
		id, ok := tok.TokenID(tt.token)
		if !ok || id != tt.id {
			t.Errorf("TokenID(%q) = %d, %v; want %d, true", tt.token, id, ok, tt.id)
		}
		if s, ok := tok.TokenString(tt.id); !ok || s != tt.token {
			t.Errorf("TokenString(%d) = %q, %v; want %q, true", tt.id, s, ok, tt.token)
		}
		if got := tok.IsSpecial(tt.id); got != tt.special {
			t.Errorf("IsSpecial(%d) = %v, want %v", tt.id, got, tt.special)
		}
	}
	if b, ok := tok.TokenBytes(220); !ok || string(b) != " " {
		t.Errorf("TokenBytes(220) = %q, %v; want \" \", true", b, ok)
	}
	for _, id := range []int{-1, 8192, 1 << 40} {
		if s, ok := tok.TokenString(id); ok {
			t.Errorf("TokenString(%d) = %q, true; want false", id, s)
		}
		if _, ok := tok.TokenBytes(id); ok {
			t.Errorf("TokenBytes(%d) reported true", id)
		}
		if tok.IsSpecial(id) {
			t.Errorf("IsSpecial(%d) = true", id)
		}
	}
	if _, ok := tok.TokenID("no such token"); ok {
		t.Error(`TokenID("no such token") reported true`)
	}
}

func TestDecodeEdgeCases(t *testing.T) {
	tok := loadFixture(t)
	// Expected strings are HF tokenizers 0.23.2's decode(ids, False).
	tests := []struct {
		name string
		ids  []int
		want string
	}{
		{"out-of-range ids are skipped", []int{99999, 39, -1, 0, 8192}, "H!"},
		{"truncated emoji is one U+FFFD", []int{447, 248}, "\uFFFD"},
		{"added token inside a character", []int{447, 8176, 248}, "\uFFFD<|user|>\uFFFD"},
		{"empty", nil, ""},
	}
	for _, tt := range tests {
		if got := tok.Decode(tt.ids, false); got != tt.want {
			t.Errorf("%s: Decode(%v) = %q, want %q", tt.name, tt.ids, got, tt.want)
		}
	}
}

func TestStreamDecoder(t *testing.T) {
	tok := loadFixture(t)
	texts := []string{
		"你好，世界！🚀👨‍👩‍👧 café",
		"[gMASK]<sop><|user|>\n日本語のテキスト<|assistant|>\n<think>😀</think>\n👍🏽",
		"emoji 🚀 and accents: café naïve",
		"ümlaut Ü 𝛩 \U00013460",
	}
	for _, text := range texts {
		ids := tok.Encode(text)
		for _, skip := range []bool{false, true} {
			d := tok.NewStreamDecoder(skip)
			var sb strings.Builder
			for _, id := range ids {
				delta := d.Add(id)
				if !utf8.ValidString(delta) {
					t.Errorf("%q: Add(%d) returned invalid UTF-8 %q", text, id, delta)
				}
				sb.WriteString(delta)
			}
			sb.WriteString(d.Flush())
			if want := tok.Decode(ids, skip); sb.String() != want {
				t.Errorf("%q skip=%v: stream gave %q, Decode gave %q", text, skip, sb.String(), want)
			}
		}
	}

	// A stream that stops inside a character: Flush renders it as Decode does.
	d := tok.NewStreamDecoder(false)
	if got := d.Add(447); got != "" { // first two bytes of a four-byte emoji
		t.Errorf("Add(447) = %q, want it held back", got)
	}
	if got := d.Flush(); got != tok.Decode([]int{447}, false) || got != "\uFFFD" {
		t.Errorf("Flush() = %q, want %q", got, "\uFFFD")
	}
	if got := d.Add(39); got != "H" {
		t.Errorf("Add after Flush = %q, want %q", got, "H")
	}
	if got := d.Add(-5); got != "" {
		t.Errorf("Add(-5) = %q, want \"\"", got)
	}
}

// TestUnicode16Classes checks characters that Unicode 16.0 added, which Go's
// unicode tables (15.0) do not know but HF tokenizers 0.23.2 does.
func TestUnicode16Classes(t *testing.T) {
	for _, r := range []rune{0x13460, 0x2EBF0, 0x1C89, 0x11380} {
		if !isL(r) || !isWordChar(r) {
			t.Errorf("U+%04X: want a letter and a word character", r)
		}
	}
	for _, r := range []rune{0x10D40, 0x1E5F1, 0x1CCF0} {
		if !isN(r) || isL(r) {
			t.Errorf("U+%04X: want a number", r)
		}
	}
	for _, r := range []rune{0x2FFFF, 0xE0232} {
		if isL(r) || isN(r) || !isOther(r) {
			t.Errorf("U+%04X: want neither letter nor number", r)
		}
	}
}

// TestConcurrentEncode encodes from several goroutines at once, sharing the
// word cache (run with -race), and checks every result against a tokenizer
// without a cache.
func TestConcurrentEncode(t *testing.T) {
	tok := loadFixture(t)
	plain := loadFixture(t)
	plain.cache = nil
	texts := []string{benchText, "hello hello world 12345 12345", "中文测试，混合 English", "  spaces\n\n\tand tabs  "}
	want := make([][]int, len(texts))
	for i, s := range texts {
		want[i] = plain.Encode(s)
	}
	errs := make(chan string, 8*len(texts))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 3 {
				for i := range texts {
					i := (i + g + round) % len(texts)
					if got := tok.Encode(texts[i]); !slices.Equal(got, want[i]) {
						errs <- fmt.Sprintf("goroutine %d: Encode(%q) = %v, want %v", g, texts[i], got, want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
