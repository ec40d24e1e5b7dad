package grammar

import (
	"strings"
	"testing"
)

// TestDescribedBounds: bounds that Anthropic's strict-schema transform moved
// into descriptions are enforced exactly as the same keywords in the schema.
func TestDescribedBounds(t *testing.T) {
	bv := byteVocab(t)
	s40 := strings.Repeat("a", 40)
	for _, c := range []struct {
		name string
		// described is the schema as the transform sends it, plain the
		// same schema with the keywords in place.
		described, plain string
		valid, invalid   []string
	}{
		{
			// What @anthropic-ai/sdk's transformJSONSchema makes of
			// z.object({topic: z.enum(...), summary: z.string().max(40), sure: z.boolean()}).
			name:      "langchain answer",
			described: `{"type":"object","properties":{"topic":{"enum":["os","path","other"]},"summary":{"type":"string","description":"{maxLength: 40}"},"sure":{"type":"boolean"}},"additionalProperties":false,"required":["topic","summary","sure"]}`,
			plain:     `{"type":"object","properties":{"topic":{"enum":["os","path","other"]},"summary":{"type":"string","maxLength":40},"sure":{"type":"boolean"}},"additionalProperties":false,"required":["topic","summary","sure"]}`,
			valid:     []string{`{"topic":"os","summary":"` + s40 + `","sure":true}`, `{"topic":"path","summary":"","sure":false}`},
			invalid:   []string{`{"topic":"os","summary":"` + s40 + `a","sure":true}`},
		},
		{
			// What LangChain's ChatAnthropic 1.5.11 sends for the same
			// schema: its transform moves enum (and $schema) too.
			name:      "langchain answer, enum described",
			described: `{"type":"object","properties":{"topic":{"type":"string","description":"{enum: [\"os\",\"path\",\"other\"]}"},"summary":{"type":"string","description":"{maxLength: 40}"},"sure":{"type":"boolean"}},"additionalProperties":false,"required":["topic","summary","sure"],"description":"{$schema: \"https://json-schema.org/draft/2020-12/schema\"}"}`,
			plain:     `{"type":"object","properties":{"topic":{"type":"string","enum":["os","path","other"]},"summary":{"type":"string","maxLength":40},"sure":{"type":"boolean"}},"additionalProperties":false,"required":["topic","summary","sure"]}`,
			valid:     []string{`{"topic":"other","summary":"` + s40 + `","sure":true}`},
			invalid:   []string{`{"topic":"x","summary":"","sure":true}`, `{"topic":"os","summary":"` + s40 + `a","sure":true}`},
		},
		{
			name:      "const described",
			described: `{"type":"string","description":"Kind\n\n{const: \"forecast\"}"}`,
			plain:     `{"type":"string","const":"forecast"}`,
			valid:     []string{`"forecast"`},
			invalid:   []string{`"forecasts"`, `"x"`},
		},
		{
			// The AI SDK's Anthropic provider writes words on a last line.
			name:      "ai sdk line",
			described: `{"type":"object","properties":{"summary":{"type":"string","description":"Summary\nmin length: 2; max length: 40; pattern: ^a; b$."},"n":{"type":"integer","description":"exclusive minimum: 0; maximum: 9."}},"required":["summary","n"],"additionalProperties":false}`,
			plain:     `{"type":"object","properties":{"summary":{"type":"string","minLength":2,"maxLength":40},"n":{"type":"integer","exclusiveMinimum":0,"maximum":9}},"required":["summary","n"],"additionalProperties":false}`,
			valid:     []string{`{"summary":"` + s40 + `","n":9}`, `{"summary":"ab","n":1}`},
			invalid:   []string{`{"summary":"` + s40 + `a","n":1}`, `{"summary":"a","n":1}`, `{"summary":"ab","n":0}`, `{"summary":"ab","n":10}`},
		},
		{
			name:      "after a description",
			described: `{"type":"string","description":"City name\n\n{minLength: 2, maxLength: 5}"}`,
			plain:     `{"type":"string","minLength":2,"maxLength":5}`,
			valid:     []string{`"Oslo"`, `"Ro"`, `"Paris"`},
			invalid:   []string{`"X"`, `"Berlin"`},
		},
		{
			name:      "array bounds",
			described: `{"type":"array","items":{"type":"integer"},"description":"{minItems: 2, maxItems: 3}"}`,
			plain:     `{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3}`,
			valid:     []string{`[1,2]`, `[1,2,3]`},
			invalid:   []string{`[1]`, `[1,2,3,4]`},
		},
		{
			name:      "integer bounds on a type list",
			described: `{"type":["integer","null"],"description":"Days\n\n{minimum: 1, maximum: 16}"}`,
			plain:     `{"type":["integer","null"],"minimum":1,"maximum":16}`,
			valid:     []string{`1`, `16`, `null`},
			invalid:   []string{`0`, `17`, `-3`},
		},
		{
			name:      "the schema's own keyword wins",
			described: `{"type":"string","maxLength":3,"description":"{maxLength: 10}"}`,
			plain:     `{"type":"string","maxLength":3}`,
			valid:     []string{`"abc"`},
			invalid:   []string{`"abcd"`},
		},
		{
			name:      "prose is not a suffix",
			described: `{"type":"string","description":"keep it {maxLength: 3} or so"}`,
			plain:     `{"type":"string"}`,
			valid:     []string{`"abcdef"`},
		},
		{
			name:      "unenforced keywords stay prose",
			described: `{"type":"string","description":"{pattern: \"^a{2}, b}$\", format: \"color\", maxLength: 3}"}`,
			plain:     `{"type":"string","maxLength":3}`,
			valid:     []string{`"zzz"`},
			invalid:   []string{`"zzzz"`},
		},
		{
			name:      "a bound for another type is not applied",
			described: `{"type":"integer","description":"{maxLength: 1}"}`,
			plain:     `{"type":"integer"}`,
			valid:     []string{`12345`},
		},
		{
			name:      "data is not a schema",
			described: `{"enum":[{"description":"{maxLength: 1}","v":"long"}]}`,
			plain:     `{"enum":[{"description":"{maxLength: 1}","v":"long"}]}`,
			valid:     []string{`{"description":"{maxLength: 1}","v":"long"}`},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			described, plain := compileFor(t, c.described), compileFor(t, c.plain)
			validate := validator(t, c.plain)
			for _, s := range c.valid {
				if err := validate([]byte(s)); err != nil {
					t.Fatalf("test case %q does not validate: %v", s, err)
				}
			}
			for _, s := range append(append([]string{}, c.valid...), c.invalid...) {
				n1, d1 := feedBytes(t, described, bv, s)
				n2, d2 := feedBytes(t, plain, bv, s)
				if n1 != n2 || d1 != d2 {
					t.Errorf("%q: described schema stops at %d (done %v), plain at %d (done %v)", s, n1, d1, n2, d2)
				}
				want := validate([]byte(s)) == nil
				if got := n1 == len(s) && d1; got != want {
					t.Errorf("%q: accepted %v, valid %v", s, got, want)
				}
			}
		})
	}
}

func TestDescriptionSuffix(t *testing.T) {
	for _, c := range []struct {
		desc string
		want string // keys=values, "" for none
	}{
		{"{maxLength: 40}", "maxLength=40"},
		{"Summary\n\n{minLength: 1, maxLength: 40}", "minLength=1 maxLength=40"},
		{"a\n\n{not: json}\n\n{maxItems: 4}", "maxItems=4"},
		{`{pattern: "x}, y: {", maxLength: 2}`, `pattern="x}, y: {" maxLength=2`},
		{"{}", ""},
		{"{maxLength 40}", ""},
		{"{maxLength: 40", ""},
		{"{maxLength: 40,}", ""},
		{"{max length: 40}", ""},
		{"text {maxLength: 40}", ""},
		{"{maxLength: 40} trailing", ""},
	} {
		var got []string
		for _, m := range descriptionSuffix(c.desc) {
			got = append(got, m.key+"="+string(m.val.encode(nil)))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%q: %q, want %q", c.desc, strings.Join(got, " "), c.want)
		}
	}
}

func TestDescribedLine(t *testing.T) {
	for _, c := range []struct {
		desc string
		want string
	}{
		{"max length: 40.", "maxLength=40"},
		{"City\nmin length: 1; max length: 10; format: city.", "minLength=1 maxLength=10"},
		{"minimum: -2.5; exclusive maximum: 7.", "minimum=-2.5 exclusiveMaximum=7"},
		{"max length: forty.", ""},
		{"The maximum: 3 apples.", ""},
		{"max length: 40", ""},
		{"Nothing to see here.", ""},
	} {
		var got []string
		for _, m := range describedLine(c.desc) {
			got = append(got, m.key+"="+string(m.val.encode(nil)))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%q: %q, want %q", c.desc, strings.Join(got, " "), c.want)
		}
	}
}

func FuzzDescriptionSuffix(f *testing.F) {
	f.Add("City\n\n{minLength: 1, maxLength: 40}")
	f.Add(`{pattern: "^a{2}$", minimum: -1.5e3}`)
	f.Fuzz(func(t *testing.T, desc string) {
		for _, m := range append(descriptionSuffix(desc), describedLine(desc)...) {
			if !isKeyword(m.key) || m.val == nil {
				t.Fatalf("%q: member %q %v", desc, m.key, m.val)
			}
		}
	})
}
