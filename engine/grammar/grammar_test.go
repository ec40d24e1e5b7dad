package grammar

import (
	"errors"
	"strings"
	"testing"
)

const personSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":20},"ok":{"type":"boolean"}},"required":["name","ok"],"additionalProperties":false}`

// schemaCases are schemas with outputs that must be accepted and outputs
// that must be refused. Valid outputs must also pass the independent
// validator. Schema "" is json_object mode.
var schemaCases = []struct {
	name    string
	schema  string
	valid   []string
	invalid []string
}{
	{
		name:   "json_object",
		schema: "",
		valid: []string{
			`{}`, `{"a":1}`, ` { "a" : [1, 2.5e-3, -0, true, false, null, {"b": {}}], "c": "x\"\\\u00e9\n" } `,
			"{\n  \"k\": \"héllo 世界 🎉\",\n  \"n\": [ ]\n}",
			"{\"a\":\n" + strings.Repeat(" ", maxIndent) + "1}",
		},
		invalid: []string{
			`[]`, `"x"`, `1`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`,
			`{"a":tru}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"a":"\ud800"}`, `{"a":1}}`, `{"a":1} x`,
			"{\"a\":\"\xff\"}", "{\"a\":\"\xc0\xaf\"}", "{\"a\":\"\xed\xa0\x80\"}", `{} {}`,
			"{\"a\":\n" + strings.Repeat(" ", maxIndent+1) + "1}", `{"a":  1}`, "{\"a\":\r\n1}", "{\"a\":\n\n1}",
			`{"a":12345678901234567}`,
		},
	},
	{
		name:    "bounded integer",
		schema:  `{"type":"integer","minimum":1,"maximum":16}`,
		valid:   []string{`1`, `16`, `9`, ` 12`},
		invalid: []string{`0`, `17`, `-1`, `100`, `01`, `1.0`, `160`},
	},
	{
		name:    "exclusive integer bounds",
		schema:  `{"type":"object","properties":{"n":{"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":2.5}},"required":["n"]}`,
		valid:   []string{`{"n":-2}`, `{"n":0}`, `{"n":2}`, `{"n":-0}`},
		invalid: []string{`{"n":-3}`, `{"n":3}`, `{"n":-10}`, `{"n":20}`},
	},
	{
		name:   "person",
		schema: personSchema,
		valid:  []string{`{"name":"Ann","ok":true}`, `{ "name": "", "ok": false }`, `{"name":"12345678901234567890","ok":true}`},
		invalid: []string{
			`{"ok":true,"name":"Ann"}`, `{"name":"Ann"}`, `{"name":"Ann","ok":true,"x":1}`, `{"name":1,"ok":true}`,
			`{"name":"123456789012345678901","ok":true}`, `{"nam":"a","ok":true}`, `{"name":"a","ok":null}`, `{}`,
		},
	},
	{
		name:   "optional properties keep their order",
		schema: `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"required":["b"]}`,
		valid:  []string{`{"b":1}`, `{"a":1,"b":2}`, `{"b":2,"c":3}`, `{"a":1,"b":2,"c":-3}`},
		invalid: []string{`{}`, `{"a":1}`, `{"c":1}`, `{"b":1,"a":2}`, `{"b":1.5}`, `{"b":1,"b":2}`, `{"b":1,"d":2}`,
			`{"b":1e3}`},
	},
	{
		name:    "additional properties with a schema",
		schema:  `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":{"type":"string"}}`,
		valid:   []string{`{"id":1}`, `{"id":1,"x":"y","idx":"z","i":""}`},
		invalid: []string{`{"x":"y","id":1}`, `{"id":1,"x":2}`, `{"id":1,"id":2}`, `{"id":1,"a\"b":"c"}`},
	},
	{
		name:    "free object",
		schema:  `{"type":"object"}`,
		valid:   []string{`{}`, `{"a":[{"b":null}]}`},
		invalid: []string{`[]`, `{"a"}`},
	},
	{
		name:    "arrays",
		schema:  `{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3}`,
		valid:   []string{`[1]`, `[1,2.5,-3e+2]`, `[ 1 , 2 ]`},
		invalid: []string{`[]`, `[1,2,3,4]`, `[1,]`, `["a"]`, `[,1]`},
	},
	{
		name:    "tuple",
		schema:  `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false,"minItems":1}`,
		valid:   []string{`["a"]`, `["a",1]`},
		invalid: []string{`[]`, `[1]`, `["a","b"]`, `["a",1,2]`},
	},
	{
		name:    "enum and const",
		schema:  `{"type":"object","properties":{"color":{"enum":["red","green",1,12,null,{"a":[1]}]},"v":{"const":"x\"y"}},"required":["color","v"],"additionalProperties":false}`,
		valid:   []string{`{"color":"red","v":"x\"y"}`, `{"color":12,"v":"x\"y"}`, `{"color":1,"v":"x\"y"}`, `{"color":null,"v":"x\"y"}`, `{"color":{"a":[1]},"v":"x\"y"}`},
		invalid: []string{`{"color":"blue","v":"x\"y"}`, `{"color":2,"v":"x\"y"}`, `{"color":123,"v":"x\"y"}`, `{"color":"red","v":"xy"}`},
	},
	{
		name:    "type lists and anyOf",
		schema:  `{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"anyOf":[{"type":"object","properties":{"k":{"const":"x"},"n":{"type":"integer"}},"required":["k","n"],"additionalProperties":false},{"type":"object","properties":{"k":{"const":"y"},"s":{"type":"string"}},"required":["k","s"],"additionalProperties":false}]}},"required":["a","b"],"additionalProperties":false}`,
		valid:   []string{`{"a":null,"b":{"k":"x","n":1}}`, `{"a":"s","b":{"k":"y","s":"t"}}`},
		invalid: []string{`{"a":1,"b":{"k":"x","n":1}}`, `{"a":null,"b":{"k":"x","s":"t"}}`, `{"a":null,"b":{"k":"z","n":1}}`},
	},
	{
		name:    "recursive $ref",
		schema:  `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
		valid:   []string{`{"v":1}`, `{"v":1,"kids":[{"v":2,"kids":[]},{"v":3}]}`},
		invalid: []string{`{"v":1,"kids":[{}]}`, `{"kids":[]}`},
	},
	{
		name:    "strings",
		schema:  `{"type":"array","items":{"type":"string","minLength":2,"maxLength":3}}`,
		valid:   []string{`[]`, `["ab","\n\u00e9x","日本語"]`},
		invalid: []string{`["a"]`, `["abcd"]`, `["日本語x"]`},
	},
	{
		name:    "integers stay within +-(2^53-1)",
		schema:  `{"type":"object","properties":{"n":{"type":"integer"},"big":{"type":"integer","maximum":1e20}},"required":["n","big"]}`,
		valid:   []string{`{"n":9007199254740991,"big":9007199254740991}`, `{"n":-9007199254740991,"big":0}`, `{"n":0,"big":-12}`},
		invalid: []string{`{"n":9007199254740992,"big":0}`, `{"n":-9007199254740992,"big":0}`, `{"n":0,"big":9007199254740992}`, `{"n":9999999999999999,"big":0}`},
	},
	{
		name:    "non-negative integer",
		schema:  `{"type":"integer","minimum":0}`,
		valid:   []string{`0`, `42`, ` 7 `},
		invalid: []string{`-1`, `1.5`, `01`, `1e2`},
	},
	{
		name:    "scalars at the root",
		schema:  `{"type":["boolean","number"]}`,
		valid:   []string{`true`, `-1.25E+10`, `0`},
		invalid: []string{`"x"`, `null`, `truex`, `1 2`},
	},
}

// feedBytes runs s through a matcher of the byte vocabulary, checking
// that the mask agrees with Accept. It reports how many bytes were accepted
// and whether the output was complete at the end.
func feedBytes(t *testing.T, g *Grammar, v *Vocab, s string) (int, bool) {
	t.Helper()
	m := g.NewMatcher(v)
	mask := make([]uint64, v.MaskWords())
	for i := 0; i < len(s); i++ {
		m.Allowed(mask)
		err := m.Accept(int(s[i]))
		if (err == nil) != has(mask, int(s[i])) {
			t.Fatalf("%q: byte %d: mask says %v, Accept says %v", s, i, has(mask, int(s[i])), err)
		}
		if err != nil {
			return i, false
		}
	}
	m.Allowed(mask)
	if has(mask, byteEOS) != m.Done() {
		t.Fatalf("%q: EOS allowed %v but Done %v", s, has(mask, byteEOS), m.Done())
	}
	return len(s), m.Done()
}

func TestSchemaCases(t *testing.T) {
	bv := byteVocab(t)
	tok, fv := fixtureVocab(t)
	for _, c := range schemaCases {
		t.Run(c.name, func(t *testing.T) {
			g := compileFor(t, c.schema)
			validate := validator(t, c.schema)
			mask := make([]uint64, fv.MaskWords())
			for _, s := range c.valid {
				if err := validate([]byte(s)); err != nil {
					t.Fatalf("test case %q does not validate: %v", s, err)
				}
				if n, done := feedBytes(t, g, bv, s); n != len(s) || !done {
					t.Errorf("%q: refused at byte %d (done %v)", s, n, done)
				}
				m := g.NewMatcher(fv)
				for _, id := range tok.Encode(s) {
					m.Allowed(mask)
					if !has(mask, id) {
						t.Fatalf("%q: token %d %q not allowed", s, id, tok.Decode([]int{id}, false))
					}
					if err := m.Accept(id); err != nil {
						t.Fatal(err)
					}
				}
				m.Allowed(mask)
				for _, e := range fixtureEOS {
					if !has(mask, e) {
						t.Errorf("%q: EOS %d not allowed at the end", s, e)
					}
				}
				if err := m.Accept(fixtureEOS[0]); err != nil || !m.Ended() {
					t.Errorf("%q: accepting EOS: %v", s, err)
				}
			}
			for _, s := range c.invalid {
				if n, done := feedBytes(t, g, bv, s); n == len(s) && done {
					t.Errorf("%q: accepted", s)
				}
			}
		})
	}
}

func TestMatcherBasics(t *testing.T) {
	v := byteVocab(t)
	g := compileFor(t, personSchema)
	m := g.NewMatcher(v)
	if m.Done() {
		t.Fatal("empty output is done")
	}
	if err := m.Accept(byteEOS); err == nil {
		t.Fatal("EOS accepted before a value")
	}
	if err := m.Accept('x'); err == nil {
		t.Fatal("'x' accepted at the start")
	}
	if err := m.AcceptBytes([]byte(`{"name":"a`)); err != nil {
		t.Fatal(err)
	}
	c := m.Clone()
	if err := c.AcceptBytes([]byte(`","ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if !c.Done() || m.Done() {
		t.Fatalf("clone done %v, original done %v", c.Done(), m.Done())
	}
	// A failed AcceptBytes leaves the matcher unchanged.
	if err := m.AcceptBytes([]byte(`","ok":x`)); err == nil {
		t.Fatal("invalid bytes accepted")
	}
	if err := m.AcceptBytes([]byte(`","ok":false}`)); err != nil {
		t.Fatal(err)
	}
	mask := make([]uint64, v.MaskWords())
	m.Allowed(mask)
	want := []int{'\n', ' ', byteEOS}
	if got := allowedIDs(mask, v.Size()); !equalInts(got, want) {
		t.Fatalf("after the value: allowed %v, want %v", got, want)
	}
	if err := m.Accept(byteEOS); err != nil {
		t.Fatal(err)
	}
	if err := m.Accept(' '); err != ErrEnded {
		t.Fatalf("after EOS: %v", err)
	}
	m.Allowed(mask)
	if got := allowedIDs(mask, v.Size()); len(got) != 0 {
		t.Fatalf("after EOS: allowed %v", got)
	}
}

// TestMaxLengthForcesClosure: at maxLength only the closing quote may follow.
func TestMaxLengthForcesClosure(t *testing.T) {
	v := byteVocab(t)
	g := compileFor(t, `{"type":"string","maxLength":2}`)
	m := g.NewMatcher(v)
	if err := m.AcceptBytes([]byte(`"é\n`)); err != nil {
		t.Fatal(err)
	}
	mask := make([]uint64, v.MaskWords())
	m.Allowed(mask)
	if got := allowedIDs(mask, v.Size()); !equalInts(got, []int{'"'}) {
		t.Fatalf("allowed %v, want only the quote", got)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCompileErrors(t *testing.T) {
	cases := []struct{ schema, want string }{
		{`{"type":"string","pattern":"^a$"}`, `unsupported keyword "pattern"`},
		{`{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`, `at #/properties/a: unsupported keyword "uniqueItems"`},
		{`{"type":"strin"}`, `unknown type "strin"`},
		{`{"$ref":"#/$defs/missing"}`, `names no definition`},
		{`{"$ref":"other.json"}`, `unsupported $ref`},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, `refers to itself`},
		{`{"anyOf":[{"$ref":"#"}]}`, `refer to themselves`},
		{`{"type":"object","properties":{"x":{"$ref":"#"}},"required":["x"]}`, `no finite value`},
		{`{"type":"string","minLength":3,"maxLength":2}`, `minLength 3 is greater than maxLength 2`},
		{`{"type":"array","items":false,"minItems":1}`, `minItems 1 needs more items`},
		{`{"type":"object","required":["a"],"additionalProperties":false}`, `required property "a" is not declared`},
		{`{"type":"string","enum":[1,2]}`, `admits no value`},
		{`{"allOf":[{},{}]}`, `allOf is supported only with exactly one schema`},
		{`{"type":"string","anyOf":[{}]}`, `combined with`},
		{`false`, `admits no value`},
		{`[1]`, `must be an object or a boolean`},
		{`{"a":1,"a":2}`, `duplicate object key`},
		{`{"type":"object"`, `not valid JSON`},
		{`{"type":"array","items":[{}]}`, `use prefixItems`},
		{`{"type":"integer","multipleOf":2}`, `unsupported keyword "multipleOf"`},
		{`{"type":"array","maxItems":-1}`, `out of range`},
	}
	for _, c := range cases {
		_, err := CompileJSONSchema([]byte(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.schema, err, c.want)
		}
	}
}

func TestNewVocabErrors(t *testing.T) {
	if _, err := NewVocab([][]byte{[]byte("a")}, nil, []int{1}); err == nil {
		t.Error("EOS outside the vocabulary accepted")
	}
	if _, err := NewVocab([][]byte{[]byte("a")}, []bool{false, true}, nil); err == nil {
		t.Error("more exclusion flags than tokens accepted")
	}
}

// TestConcurrentMatchers: a Grammar and a Vocab are shared read-only by
// matchers on several goroutines (run with -race to check).
func TestConcurrentMatchers(t *testing.T) {
	tok, v := fixtureVocab(t)
	g := compileFor(t, personSchema)
	ids := tok.Encode(`{"name":"Ann","ok":true}`)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			m := g.NewMatcher(v)
			mask := make([]uint64, v.MaskWords())
			for _, id := range ids {
				m.Allowed(mask)
				if err := m.Accept(id); err != nil {
					errs <- err
					return
				}
			}
			if !m.Done() {
				errs <- errors.New("not done at the end")
				return
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
