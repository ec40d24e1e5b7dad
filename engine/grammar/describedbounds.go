package grammar

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Anthropic's SDKs (and LangChain's ChatAnthropic, which uses them) send
// structured-output schemas through a "strict" transform that moves the
// keywords Anthropic's API does not take (maxLength, minLength, minimum,
// maxItems, a minItems over 1, in some versions enum, ...) out of the schema and into the end of
// its description, as "\n\n{maxLength: 40, minLength: 1}" (the keys bare,
// the values JSON). A model that cannot read the prose runs past such a
// bound, so the compiler lifts these constraints back into the schema
// before compiling, exactly as if they had stayed there. Only bounds the
// compiler enforces are lifted, and only where the schema does not state
// the keyword itself and its type admits it; anything else in the suffix
// (pattern, format, ...) stays prose.

// describedBounds are the keywords lifted from a description, with the
// schema type each applies to ("" for any). Some versions of the transform
// (the one LangChain's ChatAnthropic 1.5 bundles) move enum there too.
var describedBounds = map[string]string{
	"minLength": "string", "maxLength": "string",
	"minItems": "array", "maxItems": "array",
	"minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number",
	"enum": "", "const": "",
}

// liftDescribedBounds applies the description suffixes of every schema in
// the document v (values under enum, const, default and examples are data
// and are left alone).
func liftDescribedBounds(v *jvalue) {
	switch v.kind {
	case 'a':
		for _, e := range v.arr {
			liftDescribedBounds(e)
		}
		return
	case 'o':
	default:
		return
	}
	for _, m := range v.obj {
		switch m.key {
		case "enum", "const", "default", "examples":
			continue
		}
		liftDescribedBounds(m.val)
	}
	desc := v.get("description")
	if desc == nil || desc.kind != 's' {
		return
	}
	for _, kv := range append(descriptionSuffix(desc.str), describedLine(desc.str)...) {
		typ, ok := describedBounds[kv.key]
		if !ok || v.get(kv.key) != nil {
			continue
		}
		switch kv.key {
		case "enum", "const":
			if v.get("enum") != nil || v.get("const") != nil || (kv.key == "enum" && (kv.val.kind != 'a' || len(kv.val.arr) == 0)) {
				continue
			}
		default:
			if kv.val.kind != 'n' || !admitsType(v.get("type"), typ) {
				continue
			}
		}
		v.obj = append(v.obj, kv)
	}
}

// admitsType reports whether a "type" keyword admits typ ("number" also
// matches "integer").
func admitsType(t *jvalue, typ string) bool {
	match := func(s string) bool { return s == typ || (typ == "number" && s == "integer") }
	switch {
	case t == nil:
		return false
	case t.kind == 's':
		return match(t.str)
	case t.kind == 'a':
		for _, e := range t.arr {
			if e.kind == 's' && match(e.str) {
				return true
			}
		}
	}
	return false
}

// descriptionSuffix parses the "{key: JSON, key: JSON}" block that ends a
// description (the whole description, or the part after its last blank
// line); nil when there is none or it does not parse.
func descriptionSuffix(desc string) []member {
	if !strings.HasSuffix(desc, "}") {
		return nil
	}
	start := strings.LastIndex(desc, "\n\n{")
	if start >= 0 {
		start += 2
	} else if strings.HasPrefix(desc, "{") {
		start = 0
	} else {
		return nil
	}
	rest := desc[start+1:]
	var out []member
	for rest != "}" {
		key, after, ok := strings.Cut(rest, ": ")
		if !ok || !isKeyword(key) {
			return nil
		}
		dec := json.NewDecoder(strings.NewReader(after))
		dec.UseNumber()
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return nil
		}
		val, err := parseJSON(bytes.TrimSpace(raw))
		if err != nil {
			return nil
		}
		out = append(out, member{key: key, val: val})
		rest = after[dec.InputOffset():]
		if r, ok := strings.CutPrefix(rest, ", "); ok {
			rest = r
		} else if rest != "}" {
			return nil
		}
	}
	return out
}

// isKeyword reports whether s looks like a JSON Schema keyword.
func isKeyword(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '$' || c == '_'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// describedWords are the AI SDK's names of the keywords it writes into a
// description's last line (the keyword's capitals become a space and
// lower case).
var describedWords = map[string]string{
	"min length": "minLength", "max length": "maxLength", "min items": "minItems", "max items": "maxItems",
	"minimum": "minimum", "maximum": "maximum", "exclusive minimum": "exclusiveMinimum", "exclusive maximum": "exclusiveMaximum",
}

// describedLine parses the AI SDK's "name: value; name: value." last line
// of a description into the numeric bounds it names; nil when the line is
// not of that form (every clause must name a keyword the SDK writes).
func describedLine(desc string) []member {
	line := desc[strings.LastIndex(desc, "\n")+1:]
	body, ok := strings.CutSuffix(line, ".")
	if !ok || body == "" {
		return nil
	}
	var out []member
	for _, clause := range strings.Split(body, "; ") {
		name, value, ok := strings.Cut(clause, ": ")
		if !ok {
			return nil
		}
		key, known := describedWords[name]
		if !known {
			switch name {
			case "pattern":
				// Its text may hold "; ": the SDK writes the bounds of
				// numbers and lengths before it, and only items' after.
				return out
			case "multiple of", "unique items", "min properties", "max properties", "not", "format":
				continue
			}
			return nil
		}
		val, err := parseJSON([]byte(value))
		if err != nil || val.kind != 'n' {
			return nil
		}
		out = append(out, member{key: key, val: val})
	}
	return out
}
