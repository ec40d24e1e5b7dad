package grammar

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// isAnnotation reports keywords that carry no constraint and are ignored.
func isAnnotation(kw string) bool {
	switch kw {
	case "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "$schema":
		return true
	}
	return false
}

// isAssertion reports the supported constraint keywords.
func isAssertion(kw string) bool {
	switch kw {
	case "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
		"properties", "required", "additionalProperties",
		"items", "prefixItems", "minItems", "maxItems",
		"minLength", "maxLength", "format",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		return true
	}
	return false
}

func isTypeName(s string) bool {
	switch s {
	case "object", "array", "string", "number", "integer", "boolean", "null":
		return true
	}
	return false
}

// CompileJSONSchema compiles the schema of response_format
// {"type": "json_schema", "json_schema": {"schema": ...}}.
//
// Supported: type (one or a list), properties (output in their order),
// required, additionalProperties (false, true or a schema; when absent and
// properties are declared, no additional properties are generated), items,
// prefixItems, minItems, maxItems, enum, const, anyOf and oneOf (as
// alternatives: oneOf's exclusivity is not enforced), allOf with one
// member, $ref to "#", "#/$defs/..." or "#/definitions/..." (recursion
// allowed), minLength, maxLength, and minimum, maximum, exclusiveMinimum
// and exclusiveMaximum of integers. Ignored: format, the bounds of numbers
// that are not integers (except that a lower bound >= 0 forbids a minus
// sign), and the annotations title, description, default, examples,
// $comment, deprecated, readOnly, writeOnly, $schema. Any other keyword is
// refused with an error naming it and its location. Length, item and
// number bounds written into a description by Anthropic's strict-schema
// transform ("...\n\n{maxLength: 40}") are enforced as if they were
// keywords (see describedbounds.go).
func CompileJSONSchema(schema []byte) (*Grammar, error) {
	root, err := parseJSON(schema)
	if err != nil {
		return nil, fmt.Errorf("grammar: schema is not valid JSON: %w", err)
	}
	liftDescribedBounds(root)
	c := &compiler{b: newBuilder(), root: root, memo: map[memoKey]int32{}, refs: map[*jvalue]bool{}}
	c.b.g.root, err = c.compile(root, "#")
	if err != nil {
		return nil, fmt.Errorf("grammar: schema %w", err)
	}
	if err := c.b.finish(); err != nil {
		return nil, fmt.Errorf("grammar: schema: %w", err)
	}
	return c.b.g, nil
}

type memoKey struct {
	v   *jvalue
	typ string // the one type the node is restricted to, or ""
}

type compiler struct {
	b    *builder
	root *jvalue
	memo map[memoKey]int32
	refs map[*jvalue]bool // $ref chains being resolved (cycle check)
}

// errAt formats an error located at a schema path.
func errAt(path, format string, args ...any) error {
	return fmt.Errorf("at %s: %s", path, fmt.Sprintf(format, args...))
}

func (c *compiler) compile(v *jvalue, path string) (int32, error) {
	return c.compileAs(v, path, "")
}

// compileAs compiles v; typ, when set, restricts it to that one type (a
// member of a type list).
func (c *compiler) compileAs(v *jvalue, path, typ string) (int32, error) {
	if v.kind == 'b' {
		if v.b {
			return c.b.anyValue(), nil
		}
		return 0, errAt(path, "the schema false admits no value")
	}
	if v.kind != 'o' {
		return 0, errAt(path, "a schema must be an object or a boolean, not %s", v.typeName())
	}
	key := memoKey{v, typ}
	if n, ok := c.memo[key]; ok {
		return n, nil
	}
	var has []string
	for _, m := range v.obj {
		switch {
		case isAnnotation(m.key):
		case m.key == "$defs" || m.key == "definitions":
			if v != c.root {
				return 0, errAt(path, "%s is supported only at the root of the schema", m.key)
			}
		case isAssertion(m.key):
			has = append(has, m.key)
		default:
			return 0, errAt(path, "unsupported keyword %q", m.key)
		}
	}
	only := func(kw string) error {
		for _, h := range has {
			if h != kw {
				return errAt(path, "%q combined with %q is not supported", kw, h)
			}
		}
		return nil
	}
	switch {
	case v.get("$ref") != nil:
		if err := only("$ref"); err != nil {
			return 0, err
		}
		return c.ref(v, path)
	case v.get("allOf") != nil:
		if err := only("allOf"); err != nil {
			return 0, err
		}
		all := v.get("allOf")
		if all.kind != 'a' || len(all.arr) != 1 {
			return 0, errAt(path, "allOf is supported only with exactly one schema")
		}
		return c.compile(all.arr[0], path+"/allOf/0")
	case v.get("anyOf") != nil || v.get("oneOf") != nil:
		kw := "anyOf"
		if v.get(kw) == nil {
			kw = "oneOf"
		}
		if err := only(kw); err != nil {
			return 0, err
		}
		list := v.get(kw)
		if list.kind != 'a' || len(list.arr) == 0 {
			return 0, errAt(path, "%s must be a non-empty array", kw)
		}
		u := c.b.add(node{kind: kindUnion})
		c.memo[key] = u
		alts := make([]int32, len(list.arr))
		for i, s := range list.arr {
			n, err := c.compile(s, fmt.Sprintf("%s/%s/%d", path, kw, i))
			if err != nil {
				return 0, err
			}
			alts[i] = n
		}
		c.b.g.nodes[u].alts = alts
		return u, nil
	case v.get("enum") != nil || v.get("const") != nil:
		return c.literal(v, path)
	}
	types, err := schemaTypes(v, path)
	if err != nil {
		return 0, err
	}
	if typ != "" {
		types = []string{typ}
	}
	if len(types) > 1 {
		u := c.b.add(node{kind: kindUnion})
		c.memo[key] = u
		var alts []int32
		for _, t := range types {
			if t == "integer" && slices.Contains(types, "number") {
				continue
			}
			n, err := c.compileAs(v, path, t)
			if err != nil {
				return 0, err
			}
			alts = append(alts, n)
		}
		c.b.g.nodes[u].alts = alts
		return u, nil
	}
	if len(types) == 0 {
		n := c.b.anyValue()
		c.memo[key] = n
		return n, nil
	}
	n, err := c.typed(v, path, types[0], key)
	if err != nil {
		return 0, err
	}
	c.memo[key] = n
	return n, nil
}

// schemaTypes returns the types a schema allows: its "type", or the type its
// keywords imply (an empty list: any value).
func schemaTypes(v *jvalue, path string) ([]string, error) {
	t := v.get("type")
	if t == nil {
		switch {
		case v.get("properties") != nil || v.get("required") != nil || v.get("additionalProperties") != nil:
			return []string{"object"}, nil
		case v.get("items") != nil || v.get("prefixItems") != nil || v.get("minItems") != nil || v.get("maxItems") != nil:
			return []string{"array"}, nil
		case v.get("minLength") != nil || v.get("maxLength") != nil:
			return []string{"string"}, nil
		}
		return nil, nil
	}
	var list []*jvalue
	switch t.kind {
	case 's':
		list = []*jvalue{t}
	case 'a':
		list = t.arr
	default:
		return nil, errAt(path+"/type", "type must be a string or an array of strings")
	}
	var out []string
	for _, e := range list {
		if e.kind != 's' || !isTypeName(e.str) {
			return nil, errAt(path+"/type", "unknown type %s", e.encode(nil))
		}
		if slices.Contains(out, e.str) {
			return nil, errAt(path+"/type", "type %q listed twice", e.str)
		}
		out = append(out, e.str)
	}
	if len(out) == 0 {
		return nil, errAt(path+"/type", "an empty type list admits no value")
	}
	return out, nil
}

// ref resolves a $ref to "#", "#/$defs/NAME" or "#/definitions/NAME".
func (c *compiler) ref(v *jvalue, path string) (int32, error) {
	r := v.get("$ref")
	if r.kind != 's' {
		return 0, errAt(path+"/$ref", "$ref must be a string")
	}
	target := c.root
	if r.str != "#" {
		rest, ok := strings.CutPrefix(r.str, "#/")
		parts := strings.Split(rest, "/")
		if !ok || len(parts) != 2 || (parts[0] != "$defs" && parts[0] != "definitions") {
			return 0, errAt(path+"/$ref", "unsupported $ref %q: only \"#\", \"#/$defs/NAME\" and \"#/definitions/NAME\" are supported", r.str)
		}
		defs := c.root.get(parts[0])
		name := strings.NewReplacer("~1", "/", "~0", "~").Replace(parts[1])
		if defs == nil || defs.kind != 'o' || defs.get(name) == nil {
			return 0, errAt(path+"/$ref", "$ref %q names no definition", r.str)
		}
		target = defs.get(name)
	}
	if c.refs[v] {
		return 0, errAt(path, "$ref %q refers to itself", r.str)
	}
	c.refs[v] = true
	defer delete(c.refs, v)
	return c.compile(target, r.str)
}

// literal compiles enum and const, keeping the values of the allowed types.
func (c *compiler) literal(v *jvalue, path string) (int32, error) {
	for _, kw := range []string{"enum", "const"} {
		if v.get(kw) == nil {
			continue
		}
		for _, m := range v.obj {
			if isAssertion(m.key) && m.key != kw && m.key != "type" {
				return 0, errAt(path, "%q combined with %q is not supported", kw, m.key)
			}
		}
	}
	if v.get("enum") != nil && v.get("const") != nil {
		return 0, errAt(path, "enum combined with const is not supported")
	}
	types, err := schemaTypes(v, path)
	if err != nil {
		return 0, err
	}
	var values []*jvalue
	if e := v.get("enum"); e != nil {
		if e.kind != 'a' {
			return 0, errAt(path+"/enum", "enum must be an array")
		}
		values = e.arr
	} else {
		values = []*jvalue{v.get("const")}
	}
	var texts [][]byte
	for _, val := range values {
		if len(types) == 0 || slices.Contains(types, val.typeName()) ||
			(val.kind == 'n' && val.isInteger() && slices.Contains(types, "integer")) {
			texts = append(texts, val.encode(nil))
		}
	}
	if len(texts) == 0 {
		return 0, errAt(path, "enum/const admits no value of the schema's type")
	}
	n := c.b.literal(texts...)
	c.memo[memoKey{v, ""}] = n
	return n, nil
}

// typed compiles a schema restricted to one type.
func (c *compiler) typed(v *jvalue, path, typ string, key memoKey) (int32, error) {
	switch typ {
	case "boolean":
		return c.b.literal([]byte("true"), []byte("false")), nil
	case "null":
		return c.b.literal([]byte("null")), nil
	case "number", "integer":
		n := node{kind: kindNumber}
		n.lowest, n.highest = -maxIntValue, maxIntValue
		if typ == "integer" {
			// Every integer stays within I-JSON's interoperable range
			// (RFC 7493): a client parsing JSON numbers as doubles, as
			// JavaScript does, reads a larger one as another integer.
			n.kind, n.bounded = kindInteger, true
			n.lowest, n.highest = -maxSafeInteger, maxSafeInteger
		}
		for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			b := v.get(kw)
			if b == nil {
				continue
			}
			if b.kind != 'n' {
				return 0, errAt(path+"/"+kw, "%s must be a number", kw)
			}
			x, err := strconv.ParseFloat(b.str, 64)
			if err != nil {
				return 0, errAt(path+"/"+kw, "%s %s is out of range", kw, b.str)
			}
			if x >= 0 && (kw == "minimum" || kw == "exclusiveMinimum") {
				n.noMinus = true
			}
			if typ != "integer" {
				continue
			}
			// Integer bounds are enforced: the tightest integer bound.
			n.bounded = true
			switch kw {
			case "minimum":
				n.lowest = max(n.lowest, clampInt(math.Ceil(x)))
			case "exclusiveMinimum":
				n.lowest = max(n.lowest, clampInt(math.Floor(x)+1))
			case "maximum":
				n.highest = min(n.highest, clampInt(math.Floor(x)))
			case "exclusiveMaximum":
				n.highest = min(n.highest, clampInt(math.Ceil(x)-1))
			}
		}
		if n.bounded && n.lowest > n.highest {
			return 0, errAt(path, "no integer lies within minimum/maximum")
		}
		return c.b.add(n), nil
	case "string":
		lo, err := count(v, path, "minLength", 0)
		if err != nil {
			return 0, err
		}
		hi, err := count(v, path, "maxLength", -1)
		if err != nil {
			return 0, err
		}
		if hi >= 0 && lo > hi {
			return 0, errAt(path, "minLength %d is greater than maxLength %d", lo, hi)
		}
		if f := v.get("format"); f != nil && f.kind != 's' {
			return 0, errAt(path+"/format", "format must be a string")
		}
		return c.b.add(node{kind: kindString, minLen: lo, maxLen: hi}), nil
	case "array":
		return c.array(v, path, key)
	}
	return c.object(v, path, key)
}

// maxIntValue is the largest magnitude of an integer of maxIntDigits digits.
const maxIntValue = 1e16 - 1

// maxSafeInteger is the largest integer magnitude a double holds exactly,
// 2^53 - 1: the bound of every integer value (I-JSON, RFC 7493 §2.2).
const maxSafeInteger = 1<<53 - 1

// clampInt converts a bound to an int64 within +-maxIntValue.
func clampInt(x float64) int64 {
	return int64(max(-maxIntValue, min(maxIntValue, x)))
}

// count reads a non-negative integer keyword (def when absent).
func count(v *jvalue, path, kw string, def int32) (int32, error) {
	e := v.get(kw)
	if e == nil {
		return def, nil
	}
	if !e.isInteger() {
		return 0, errAt(path+"/"+kw, "%s must be an integer", kw)
	}
	x, _ := strconv.ParseFloat(e.str, 64)
	if x < 0 || x > math.MaxInt32 {
		return 0, errAt(path+"/"+kw, "%s %s is out of range", kw, e.str)
	}
	return int32(x), nil
}

func (c *compiler) array(v *jvalue, path string, key memoKey) (int32, error) {
	lo, err := count(v, path, "minItems", 0)
	if err != nil {
		return 0, err
	}
	hi, err := count(v, path, "maxItems", -1)
	if err != nil {
		return 0, err
	}
	if hi >= 0 && lo > hi {
		return 0, errAt(path, "minItems %d is greater than maxItems %d", lo, hi)
	}
	id := c.b.add(node{kind: kindArray, minItems: lo, maxItems: hi, items: -1})
	c.memo[key] = id
	var prefix []int32
	if p := v.get("prefixItems"); p != nil {
		if p.kind != 'a' {
			return 0, errAt(path+"/prefixItems", "prefixItems must be an array")
		}
		for i, s := range p.arr {
			n, err := c.compile(s, fmt.Sprintf("%s/prefixItems/%d", path, i))
			if err != nil {
				return 0, err
			}
			prefix = append(prefix, n)
		}
	}
	items := int32(-1)
	switch it := v.get("items"); {
	case it == nil:
		items = c.b.anyValue()
	case it.kind == 'a':
		return 0, errAt(path+"/items", "items as an array (tuple form) is not supported; use prefixItems")
	case it.kind == 'b' && !it.b:
	default:
		if items, err = c.compile(it, path+"/items"); err != nil {
			return 0, err
		}
	}
	n := &c.b.g.nodes[id]
	n.prefix, n.items = prefix, items
	if items < 0 && lo > int32(len(prefix)) {
		return 0, errAt(path, "minItems %d needs more items than prefixItems allows (%d)", lo, len(prefix))
	}
	return id, nil
}

func (c *compiler) object(v *jvalue, path string, key memoKey) (int32, error) {
	id := c.b.add(node{kind: kindObject, additional: -1})
	c.memo[key] = id
	var props []prop
	if p := v.get("properties"); p != nil {
		if p.kind != 'o' {
			return 0, errAt(path+"/properties", "properties must be an object")
		}
		for _, m := range p.obj {
			n, err := c.compile(m.val, path+"/properties/"+pointerEscape(m.key))
			if err != nil {
				return 0, err
			}
			props = append(props, prop{name: m.key, node: n})
		}
	}
	additional := int32(-1)
	switch a := v.get("additionalProperties"); {
	case a == nil:
		if len(props) == 0 {
			additional = c.b.anyValue()
		}
	case a.kind == 'b' && !a.b:
	default:
		var err error
		if additional, err = c.compile(a, path+"/additionalProperties"); err != nil {
			return 0, err
		}
	}
	if r := v.get("required"); r != nil {
		if r.kind != 'a' {
			return 0, errAt(path+"/required", "required must be an array of strings")
		}
		for _, e := range r.arr {
			if e.kind != 's' {
				return 0, errAt(path+"/required", "required must be an array of strings")
			}
			i := slices.IndexFunc(props, func(p prop) bool { return p.name == e.str })
			if i >= 0 {
				props[i].required = true
				continue
			}
			// A required property that is not declared is an additional
			// one: it takes the additional schema, after the declared ones.
			a := additional
			if v.get("additionalProperties") == nil {
				a = c.b.anyValue()
			}
			if a < 0 {
				return 0, errAt(path+"/required", "required property %q is not declared and additionalProperties is false", e.str)
			}
			props = append(props, prop{name: e.str, node: a, required: true})
		}
	}
	n := &c.b.g.nodes[id]
	n.props, n.additional = props, additional
	return id, nil
}

func pointerEscape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
