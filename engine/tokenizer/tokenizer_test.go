package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

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

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
