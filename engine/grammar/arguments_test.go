package grammar

import (
	"fmt"
	"strings"
	"testing"
)

// weatherParams is a tool schema with every kind of string constraint.
const weatherParams = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"properties": {
		"city": {"type": "string", "minLength": 1, "maxLength": 8},
		"unit": {"type": "string", "enum": ["c", "f"]},
		"kind": {"const": "forecast"},
		"days": {"type": "integer", "minimum": 1},
		"where": {"$ref": "#/$defs/place"},
		"note": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]},
		"tags": {"type": "array", "items": {"enum": ["a<b", "x"]}},
		"any": {}
	},
	"required": ["city", "unit", "kind", "extra"],
	"additionalProperties": false,
	"$defs": {"place": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}}
}`

func TestCompileArguments(t *testing.T) {
	// A required property that is not declared is refused with
	// additionalProperties false.
	if _, err := CompileArguments([]byte(weatherParams)); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Fatalf("undeclared required property: %v", err)
	}
	schema := strings.Replace(weatherParams, `, "extra"]`, `]`, 1)
	args, err := CompileArguments([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	bv := byteVocab(t)
	cases := []struct {
		name     string
		required bool
		raw      bool
		valid    []string
		invalid  []string
	}{
		{"city", true, true, []string{"Paris", "12345678", "a b\"c\\"}, []string{"", "123456789", "a<b", "x\x01"}},
		{"unit", true, true, []string{"c", "f"}, []string{"", "C", "cf", "\"c\"", " c", "c "}},
		{"kind", true, true, []string{"forecast"}, []string{"forecas", "forecasts", "\"forecast\""}},
		{"days", false, false, []string{"1", " 7", "12"}, []string{"-1", "x", "\"1\""}},
		{"where", false, false, []string{`{"lat":1.5}`}, []string{`{}`, `{"lon":1}`, `1`}},
		{"note", false, true, []string{"", "abc"}, []string{"abcd", "null"}},
		{"tags", false, false, []string{`["x"]`, `[]`}, []string{`["y"]`}},
		{"any", false, false, []string{`"s"`, `1`, `{"a":[null]}`}, []string{`s`}},
	}
	if len(args.Props) != len(cases) || args.Additional {
		t.Fatalf("props %d, additional %v", len(args.Props), args.Additional)
	}
	for i, c := range cases {
		a := args.Props[i]
		if a.Name != c.name || a.Required != c.required || a.Raw != c.raw {
			t.Errorf("prop %d: %s required %v raw %v, want %s %v %v", i, a.Name, a.Required, a.Raw, c.name, c.required, c.raw)
			continue
		}
		for _, s := range c.valid {
			if n, done := feedBytes(t, a.Value, bv, s); n != len(s) || !done {
				t.Errorf("%s: %q refused after %d bytes (done %v)", c.name, s, n, done)
			}
		}
		for _, s := range c.invalid {
			if n, done := feedBytes(t, a.Value, bv, s); n == len(s) && done {
				t.Errorf("%s: %q accepted", c.name, s)
			}
		}
	}
	// A raw value allows no end-of-sequence byte before it is complete, and
	// no '<' token at all (checked on the fixture vocabulary's mask).
	_, fv := fixtureVocab(t)
	mask := make([]uint64, fv.MaskWords())
	m := args.Props[0].Value.NewMatcher(fv)
	m.Allowed(mask)
	for _, id := range allowedIDs(mask, fv.Size()) {
		if strings.Contains(string(fv.tokens[id]), "<") {
			t.Fatalf("raw value allows token %q", fv.tokens[id])
		}
	}
	for _, e := range fv.eos {
		if has(mask, e) {
			t.Fatal("an empty city is complete")
		}
	}
}

func TestCompileArgumentsErrors(t *testing.T) {
	for _, s := range []string{`{"type":"string"}`, `{"type":"object","properties":{"a":{"pattern":"x"}}}`, `{`, `{"properties":{"a":{"type":"integer","minimum":3,"maximum":2.5}}}`} {
		if _, err := CompileArguments([]byte(s)); err == nil {
			t.Errorf("%s compiled", s)
		}
	}
	for _, s := range []string{``, `null`, `{"type":"object"}`} {
		args, err := CompileArguments([]byte(s))
		if err != nil || len(args.Props) != 0 {
			t.Errorf("%q: %v %v", s, args, err)
		}
	}
}

// TestArgumentsMaskMatchesNaive compares the trie walk with token-by-token
// acceptance inside raw values.
func TestArgumentsMaskMatchesNaive(t *testing.T) {
	_, fv := fixtureVocab(t)
	args, err := CompileArguments([]byte(strings.Replace(weatherParams, `, "extra"]`, `]`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]uint64, fv.MaskWords())
	got := make([]uint64, fv.MaskWords())
	for _, st := range []struct{ prop, prefix string }{{"city", ""}, {"city", "Pa"}, {"unit", ""}, {"note", "a"}, {"kind", "fore"}} {
		var a *Argument
		for i := range args.Props {
			if args.Props[i].Name == st.prop {
				a = &args.Props[i]
			}
		}
		m := a.Value.NewMatcher(fv)
		if err := m.AcceptBytes([]byte(st.prefix)); err != nil {
			t.Fatal(err)
		}
		naiveAllowed(m, want)
		m.Allowed(got)
		for i := range want {
			if want[i] != got[i] {
				t.Fatalf("%s after %q: masks differ (naive %d tokens, walk %d)", st.prop, st.prefix, len(allowedIDs(want, fv.Size())), len(allowedIDs(got, fv.Size())))
			}
		}
	}
}

func ExampleCompileArguments() {
	args, err := CompileArguments([]byte(`{"type":"object","properties":{"unit":{"enum":["c","f"]},"n":{"type":"integer"}},"required":["unit"]}`))
	if err != nil {
		panic(err)
	}
	for _, a := range args.Props {
		fmt.Printf("%s required=%v raw=%v\n", a.Name, a.Required, a.Raw)
	}
	// Output:
	// unit required=true raw=true
	// n required=false raw=false
}
