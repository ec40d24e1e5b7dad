package grammar

import (
	"bytes"
	"testing"
)

// FuzzCompileJSONSchema: no schema makes the compiler panic, and a schema
// that compiles gives a matcher whose mask agrees with Accept, whose outputs
// stay JSON prefixes, and whose complete outputs validate (unless the schema
// uses what the grammar does not enforce: numeric bounds, oneOf's
// exclusivity).
func FuzzCompileJSONSchema(f *testing.F) {
	for _, c := range schemaCases {
		if c.schema != "" {
			f.Add([]byte(c.schema), []byte(c.valid[0]))
		}
	}
	f.Add([]byte(`{"anyOf":[{"type":"string"},{"type":"string","maxLength":1},{"enum":["a","ab"]}]}`), []byte(`"ab"`))
	f.Add([]byte(`{"$defs":{"n":{"anyOf":[{"type":"null"},{"type":"array","items":{"$ref":"#/$defs/n"}}]}},"$ref":"#/$defs/n"}`), []byte(`[[null],[]]`))
	v := byteVocab(f)
	f.Fuzz(func(t *testing.T, schema, input []byte) {
		g, err := CompileJSONSchema(schema)
		if err != nil {
			return
		}
		out, done := checkInput(t, g, v, input)
		if !done || bytes.Contains(schema, []byte("imum")) || bytes.Contains(schema, []byte("oneOf")) {
			return
		}
		validate, err := newValidator(string(schema))
		if err != nil {
			return
		}
		if err := validate(out); err != nil {
			t.Fatalf("%q is complete but does not validate: %v", out, err)
		}
	})
}

// FuzzMatcher feeds arbitrary bytes to the json_object matcher: a byte is
// accepted exactly when the mask allows it, and what is accepted is always
// a JSON prefix.
func FuzzMatcher(f *testing.F) {
	for _, c := range schemaCases {
		for _, s := range append(c.valid, c.invalid...) {
			f.Add([]byte(s))
		}
	}
	g := JSONObject()
	v := byteVocab(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		checkInput(t, g, v, input)
	})
}

// checkInput feeds the bytes of input that are allowed and returns them,
// and whether they make a complete value.
func checkInput(t *testing.T, g *Grammar, v *Vocab, input []byte) ([]byte, bool) {
	m := g.NewMatcher(v)
	mask := make([]uint64, v.MaskWords())
	var out []byte
	for _, b := range input {
		m.Allowed(mask)
		err := m.Accept(int(b))
		if (err == nil) != has(mask, int(b)) {
			t.Fatalf("after %q: byte %q: mask %v, Accept %v", out, b, has(mask, int(b)), err)
		}
		if err != nil {
			continue
		}
		out = append(out, b)
		if !validPrefix(out) {
			t.Fatalf("%q accepted but is not a JSON prefix", out)
		}
	}
	return out, m.Done()
}

// FuzzCompileArguments: no parameters schema makes the compiler panic, and
// each argument's matcher accepts a byte exactly when its mask allows it;
// what a JSON argument accepts stays a JSON prefix, what a raw one accepts
// holds no '<'.
func FuzzCompileArguments(f *testing.F) {
	f.Add([]byte(weatherParams), []byte("Paris"))
	f.Add([]byte(`{"properties":{"u":{"enum":["c","f",1]}}}`), []byte("c"))
	v := byteVocab(f)
	mask := make([]uint64, v.MaskWords())
	f.Fuzz(func(t *testing.T, schema, input []byte) {
		args, err := CompileArguments(schema)
		if err != nil {
			return
		}
		for _, a := range args.Props {
			m := a.Value.NewMatcher(v)
			var out []byte
			for _, b := range input {
				m.Allowed(mask)
				err := m.Accept(int(b))
				if (err == nil) != has(mask, int(b)) {
					t.Fatalf("%s after %q: byte %q: mask %v, Accept %v", a.Name, out, b, has(mask, int(b)), err)
				}
				if err != nil {
					continue
				}
				out = append(out, b)
				if a.Raw && bytes.IndexByte(out, '<') >= 0 || !a.Raw && !validPrefix(out) {
					t.Fatalf("%s (raw %v): %q accepted", a.Name, a.Raw, out)
				}
			}
		}
	})
}
