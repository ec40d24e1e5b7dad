package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/fixtures"
)

// benchText is a few KB of mixed prose, code, chat markers and CJK.
var benchText = strings.Repeat(`[gMASK]<sop><|user|>
What does the function json.dumps do? It's used like json.dumps(obj, indent=2).<|assistant|>
<think>The user asks about Python's json module.</think>
`+"`json.dumps`"+` serializes a Python object to a JSON formatted str.

    def f(x):
        return {"x": x ** 2, "ok": True}  # 1234567 and 3.14159

中文测试，混合 English text with emoji 🚀 and accents: café naïve.
`, 8)

// BenchmarkEncode encodes with the demo model's tokenizer: with a warm word
// cache (the text repeats), with a cold one (as for the first prompt of a
// process), and without one.
func BenchmarkEncode(b *testing.B) {
	tok, err := Load(fixtures.Path(b, "glm52-mini", "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"warm", "cold", "off"} {
		b.Run(mode, func(b *testing.B) {
			tok.cache = newWordCache()
			if mode == "off" {
				tok.cache = nil
			}
			b.SetBytes(int64(len(benchText)))
			b.ReportAllocs()
			for b.Loop() {
				if mode == "cold" {
					b.StopTimer()
					tok.cache = newWordCache()
					b.StartTimer()
				}
				tok.Encode(benchText)
			}
		})
	}
}

// BenchmarkEncodeLargeVocab encodes with a synthetic tokenizer as large as
// GLM-5.2's (about 155k ids, 154k merges), to show encode cost does not grow
// with the vocabulary.
func BenchmarkEncodeLargeVocab(b *testing.B) {
	tok, err := Parse(syntheticTokenizer(b, 154_000, false))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchText)))
	b.ReportAllocs()
	for b.Loop() {
		tok.Encode(benchText)
	}
}

// BenchmarkParseLargeVocab parses a synthetic tokenizer.json as large as
// GLM-5.2's, compact and with the vocabulary sorted by token (the worst order
// for memory access).
func BenchmarkParseLargeVocab(b *testing.B) {
	data := syntheticTokenizer(b, 154_000, false)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseLargeVocabHF parses a synthetic tokenizer.json as large as
// GLM-5.2's, laid out as HF tokenizers writes it.
func BenchmarkParseLargeVocabHF(b *testing.B) {
	data := syntheticTokenizer(b, 154_000, true)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseFixture parses the demo model's tokenizer.json (8k ids).
func BenchmarkParseFixture(b *testing.B) {
	data, err := os.ReadFile(fixtures.Path(b, "glm52-mini", "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	tok, err := Load(fixtures.Path(b, "glm52-mini", "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(benchText)
	b.SetBytes(int64(len(benchText)))
	for b.Loop() {
		tok.Decode(ids, true)
	}
}

// syntheticTokenizer builds a valid byte-level BPE tokenizer.json with the
// 256 byte tokens plus nMerges merges learned greedily from benchText-like
// pairs and random pairs, with the GLM pre-tokenizer. With hfLayout the file
// is laid out as HF tokenizers writes it (indented, vocabulary in id order);
// otherwise it is compact with the vocabulary sorted by token.
func syntheticTokenizer(t testing.TB, nMerges int, hfLayout bool) []byte {
	t.Helper()
	vocab := make(map[string]int, 256+nMerges)
	var tokens []string
	for c := range 256 {
		s := string(byteToRune[c])
		vocab[s] = len(tokens)
		tokens = append(tokens, s)
	}
	var merges [][2]string
	// Merges that real text uses: adjacent byte-level pairs of benchText words,
	// merged bottom-up.
	words := strings.Fields(benchText)
	for round := 0; round < 6; round++ {
		for _, w := range words {
			var syms []string
			for _, c := range []byte(" " + w) {
				syms = append(syms, string(byteToRune[c]))
			}
			for i := 0; i+1 < len(syms); i += 2 {
				a, c := syms[i], syms[i+1]
				if _, ok := vocab[a+c]; !ok {
					vocab[a+c] = len(tokens)
					tokens = append(tokens, a+c)
					merges = append(merges, [2]string{a, c})
				}
			}
		}
	}
	// Filler merges of short random tokens up to the requested size.
	rng := rand.New(rand.NewPCG(1, 2))
	for len(merges) < nMerges {
		a, c := tokens[rng.IntN(len(tokens))], tokens[rng.IntN(len(tokens))]
		if len(a)+len(c) > 24 {
			continue
		}
		if _, ok := vocab[a+c]; ok {
			continue
		}
		vocab[a+c] = len(tokens)
		tokens = append(tokens, a+c)
		merges = append(merges, [2]string{a, c})
	}
	if len(vocab) != 256+nMerges {
		t.Fatal(fmt.Sprintf("synthetic vocabulary has %d entries, want %d", len(vocab), 256+nMerges))
	}
	added := []map[string]any{{"id": len(tokens), "content": "[gMASK]", "special": true}}
	preTok := map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": glmPattern}, "behavior": "Isolated"},
		map[string]any{"type": "ByteLevel"},
	}}
	decoder := map[string]any{"type": "ByteLevel"}
	if !hfLayout {
		doc := map[string]any{
			"added_tokens":  added,
			"pre_tokenizer": preTok,
			"decoder":       decoder,
			"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": true},
		}
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	marshal := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `{"version":"1.0","truncation":null,"padding":null,"added_tokens":%s,"normalizer":null,"pre_tokenizer":%s,"post_processor":null,"decoder":%s,`,
		marshal(added), marshal(preTok), marshal(decoder))
	buf.WriteString(`"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"ignore_merges":true,"vocab":{`)
	for id, tok := range tokens {
		if id > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, "%s:%d", marshal(tok), id)
	}
	fmt.Fprintf(&buf, `},"merges":%s}}`, marshal(merges))
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
