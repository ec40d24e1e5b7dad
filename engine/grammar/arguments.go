package grammar

import (
	"errors"
	"fmt"
	"strings"
)

// Arguments is a function's parameters schema compiled for writing its
// arguments one at a time, as tool-call markup does: each declared
// property gets the grammar of its value alone.
//
// A property whose schema admits strings (its type, or one of its anyOf,
// oneOf, enum or const alternatives, through $ref; a schema without a type
// does not count) is written as raw text,
// the way chat templates render string arguments: no quotes and no
// escapes, and only the string values of the schema (enum and const
// strings, minLength, maxLength). Raw values never contain '<' or control
// characters other than tab, newline and carriage return; enum and const
// strings that do are dropped. Every other property is written as JSON
// under its schema, with $ref and $defs resolved against the whole
// parameters schema.
type Arguments struct {
	// Props are the declared properties in the schema's order, then any
	// required property that is not declared.
	Props []Argument
	// Additional reports that properties beyond Props are allowed.
	Additional bool
}

// Argument is one property of Arguments.
type Argument struct {
	Name     string
	Required bool
	// Raw says the value is raw text rather than JSON.
	Raw bool
	// Value is the grammar of the value; a raw value is complete wherever
	// Done reports it, since nothing closes it.
	Value *Grammar
}

// CompileArguments compiles a function's parameters schema (a JSON Schema
// object, see CompileJSONSchema for the keywords supported). An empty or
// null schema means no parameters.
func CompileArguments(schema []byte) (*Arguments, error) {
	if s := strings.TrimSpace(string(schema)); s == "" || s == "null" {
		return &Arguments{}, nil
	}
	root, err := parseJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("grammar: parameters schema is not valid JSON: %w", err)
	}
	c := &compiler{b: newBuilder(), root: root, memo: map[memoKey]int32{}, refs: map[*jvalue]bool{}}
	top, err := c.compile(root, "#")
	if err != nil {
		return nil, fmt.Errorf("grammar: parameters schema %w", err)
	}
	if c.b.g.nodes[top].kind != kindObject {
		return nil, errors.New("grammar: the parameters schema must describe an object")
	}
	c.b.g.root = top
	// The raw variants are nodes of the same grammar, added before finish.
	raws := map[int32]int32{}
	props := c.b.g.nodes[top].props
	rawOf := make([]int32, len(props))
	for i, p := range props {
		rawOf[i] = c.b.rawVariant(p.node, raws)
	}
	names := make([]string, len(props))
	for i, p := range props {
		names[i] = p.name
	}
	if err := c.b.finish(); err != nil {
		return nil, fmt.Errorf("grammar: parameters schema: %w", err)
	}
	g := c.b.g
	obj := &g.nodes[top]
	args := &Arguments{Additional: obj.additional >= 0}
	for _, p := range obj.props {
		i := indexOf(names, p.name)
		a := Argument{Name: p.name, Required: p.required, Value: g.view(p.node, false)}
		if i >= 0 && rawOf[i] >= 0 {
			a.Raw, a.Value = true, g.view(rawOf[i], true)
		}
		args.Props = append(args.Props, a)
	}
	return args, nil
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// view is the grammar of one node of g; it shares g's tables.
func (g *Grammar) view(root int32, raw bool) *Grammar {
	return &Grammar{nodes: g.nodes, lits: g.lits, root: root, keyString: g.keyString, raw: raw}
}

// rawVariant returns a node that writes, as raw text, the string values
// node n admits; -1 if it admits none.
// A schema of any value (no type) is written as JSON: it admits no raw
// strings.
func (b *builder) rawVariant(n int32, memo map[int32]int32) int32 {
	if n == b.any {
		return -1
	}
	if r, ok := memo[n]; ok {
		return r
	}
	memo[n] = -1 // a cycle through unions admits no more strings
	nd := b.g.nodes[n]
	r := int32(-1)
	switch nd.kind {
	case kindString:
		r = b.add(node{kind: kindString, raw: true, minLen: nd.minLen, maxLen: nd.maxLen})
	case kindLiteral:
		var texts [][]byte
		for _, s := range b.stringLiterals(nd.lit) {
			if !strings.ContainsFunc(s, func(c rune) bool { return c == '<' || c < 0x20 && c != '\t' && c != '\n' && c != '\r' }) {
				texts = append(texts, []byte(s))
			}
		}
		if len(texts) > 0 {
			r = b.literal(texts...)
		}
	case kindUnion:
		var alts []int32
		for _, a := range nd.alts {
			if v := b.rawVariant(a, memo); v >= 0 {
				alts = append(alts, v)
			}
		}
		switch len(alts) {
		case 0:
		case 1:
			r = alts[0]
		default:
			r = b.add(node{kind: kindUnion, alts: alts})
		}
	}
	memo[n] = r
	return r
}

// stringLiterals returns the string values among the JSON texts of the
// literal trie at root.
func (b *builder) stringLiterals(root int32) []string {
	var out []string
	var walk func(n int32, text []byte)
	walk = func(n int32, text []byte) {
		l := b.g.lits[n]
		if l.term >= 0 && len(text) > 0 && text[0] == '"' {
			if v, err := parseJSON(text); err == nil && v.kind == 's' {
				out = append(out, v.str)
			}
		}
		for _, e := range l.edges {
			walk(e.next, append(text, e.b))
		}
	}
	walk(root, nil)
	return out
}
