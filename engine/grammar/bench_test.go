package grammar

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unicode/utf8"
)

// naiveAllowed computes the mask by testing every token on its own: the
// reference the trie walk must agree with.
func naiveAllowed(m *Matcher, mask []uint64) {
	clear(mask)
	for id, t := range m.v.tokens {
		if m.v.banned[id] {
			continue
		}
		if m.Clone().AcceptBytes(t) == nil {
			mask[id>>6] |= 1 << (id & 63)
		}
	}
	if m.Done() && !m.ended {
		for _, id := range m.v.eos {
			mask[id>>6] |= 1 << (id & 63)
		}
	}
}

// maskStates are outputs after which masks are compared and timed.
var maskStates = []struct {
	name, schema, prefix string
}{
	{"object start", "", ``},
	{"object key", "", `{"`},
	{"free string", "", `{"a":"xy`},
	{"string escape", "", `{"a":"x\`},
	{"number", "", `{"a":12`},
	{"value", "", `{"a": `},
	{"schema key", personSchema, `{`},
	{"schema string", personSchema, `{"name":"abc`},
	{"schema bool", personSchema, `{"name":"abc","ok":`},
	{"additional key", `{"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":{"type":"string"}}`, `{"id":1,"i`},
	{"union", `{"anyOf":[{"type":"string","maxLength":3},{"type":"string","minLength":5},{"enum":["abcd"]}]}`, `"ab`},
	{"done", personSchema, `{"name":"","ok":true}`},
}

func TestMaskMatchesNaive(t *testing.T) {
	_, fixture := fixtureVocab(t)
	for _, v := range []*Vocab{fixture, syntheticVocab(t, 20000)} {
		compareNaive(t, v)
	}
}

func compareNaive(t *testing.T, v *Vocab) {
	want := make([]uint64, v.MaskWords())
	got := make([]uint64, v.MaskWords())
	for _, s := range maskStates {
		m := compileFor(t, s.schema).NewMatcher(v)
		if err := m.AcceptBytes([]byte(s.prefix)); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		m.Allowed(got)
		naiveAllowed(m, want)
		if !slices.Equal(got, want) {
			var extra, missing []int
			for id := range v.Size() {
				if has(got, id) && !has(want, id) {
					extra = append(extra, id)
				}
				if !has(got, id) && has(want, id) {
					missing = append(missing, id)
				}
			}
			t.Errorf("%s: trie mask differs from the naive one: extra %v, missing %v", s.name, extra, missing)
		}
		if n := len(allowedIDs(got, v.Size())); n == 0 {
			t.Errorf("%s: nothing allowed", s.name)
		}
	}
}

// syntheticVocab makes a BPE-like vocabulary of n tokens: words with and
// without a leading space, CJK runs, digits, punctuation mixed with quotes,
// braces and newlines, and byte fragments of multi-byte characters.
func syntheticVocab(tb testing.TB, n int) *Vocab {
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	const punct = "\"{}[]:,.\\\n -_()!?'#/*=+<>"
	tokens := make([][]byte, n)
	for i := range 256 {
		tokens[i] = []byte{byte(i)}
	}
	for i := 256; i < n; i++ {
		var t []byte
		switch r := rng.IntN(100); {
		case r < 60:
			if rng.IntN(2) == 0 {
				t = append(t, ' ')
			}
			for range 2 + rng.IntN(9) {
				t = append(t, letters[rng.IntN(len(letters))])
			}
		case r < 72:
			for range 1 + rng.IntN(4) {
				t = append(t, punct[rng.IntN(len(punct))])
			}
		case r < 80:
			for range 1 + rng.IntN(3) {
				t = append(t, byte('0'+rng.IntN(10)))
			}
		case r < 95:
			for range 1 + rng.IntN(3) {
				t = utf8.AppendRune(t, rune(0x4e00+rng.IntN(0x5000)))
			}
		default:
			c := utf8.AppendRune(nil, rune(0x4e00+rng.IntN(0x5000)))
			t = c[:1+rng.IntN(2)]
		}
		tokens[i] = t
	}
	excluded := make([]bool, n)
	eos := n - 1
	excluded[eos] = true
	v, err := NewVocab(tokens, excluded, []int{eos})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// BenchmarkAllowed times one mask in each state for the fixture vocabulary
// (8,192 ids) and a synthetic one of GLM-5.2's size (154,880 ids), with the
// trie walk and with the naive per-token test for comparison.
func BenchmarkAllowed(b *testing.B) {
	_, fixture := fixtureVocab(b)
	vocabs := []struct {
		name string
		v    *Vocab
	}{{"8192", fixture}, {"154880", syntheticVocab(b, 154880)}}
	for _, voc := range vocabs {
		mask := make([]uint64, voc.v.MaskWords())
		for _, s := range maskStates {
			m := compileFor(b, s.schema).NewMatcher(voc.v)
			if err := m.AcceptBytes([]byte(s.prefix)); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("vocab=%s/%s/trie", voc.name, s.name), func(b *testing.B) {
				for b.Loop() {
					m.Allowed(mask)
				}
			})
			b.Run(fmt.Sprintf("vocab=%s/%s/naive", voc.name, s.name), func(b *testing.B) {
				for b.Loop() {
					naiveAllowed(m, mask)
				}
			})
		}
	}
}

// BenchmarkNewVocab times the once-per-tokenizer preparation at GLM-5.2's
// vocabulary size.
func BenchmarkNewVocab(b *testing.B) {
	v := syntheticVocab(b, 154880)
	excluded := make([]bool, v.size)
	copy(excluded, v.banned)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewVocab(v.tokens, excluded, v.eos); err != nil {
			b.Fatal(err)
		}
	}
}
