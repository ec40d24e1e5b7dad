package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// maxSchemaNesting bounds how deeply a schema document may nest, so that a
// hostile schema cannot exhaust the stack of the decoder or the compiler.
const maxSchemaNesting = 128

// jvalue is a decoded JSON value that keeps the order of object members
// (encoding/json's maps do not, and the order of "properties" matters).
type jvalue struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' boolean, 'z' null
	obj  []member
	arr  []*jvalue
	str  string // string value, or the number's text
	b    bool
}

type member struct {
	key string
	val *jvalue
}

// get returns the member named key, or nil.
func (v *jvalue) get(key string) *jvalue {
	for _, m := range v.obj {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// typeName is the JSON Schema type name of the value ("integer" is reported
// as "number"; see isInteger).
func (v *jvalue) typeName() string {
	switch v.kind {
	case 'o':
		return "object"
	case 'a':
		return "array"
	case 's':
		return "string"
	case 'n':
		return "number"
	case 'b':
		return "boolean"
	}
	return "null"
}

// isInteger reports whether a number has no fractional part.
func (v *jvalue) isInteger() bool {
	if v.kind != 'n' {
		return false
	}
	x, err := json.Number(v.str).Float64()
	return err == nil && !math.IsInf(x, 0) && math.Trunc(x) == x
}

// parseJSON decodes data into an ordered value. Duplicate object keys are an
// error: they make a schema ambiguous.
func parseJSON(data []byte) (*jvalue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the top-level value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (*jvalue, error) {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return decodeFrom(dec, tok, depth)
}

func decodeFrom(dec *json.Decoder, tok json.Token, depth int) (*jvalue, error) {
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxSchemaNesting {
			return nil, fmt.Errorf("nesting deeper than %d levels", maxSchemaNesting)
		}
		if t == '[' {
			v := &jvalue{kind: 'a'}
			for dec.More() {
				e, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		}
		v := &jvalue{kind: 'o'}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("object key is %v, not a string", kt)
			}
			if seen[key] {
				return nil, fmt.Errorf("duplicate object key %q", key)
			}
			seen[key] = true
			e, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			v.obj = append(v.obj, member{key, e})
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return v, nil
	case string:
		return &jvalue{kind: 's', str: t}, nil
	case json.Number:
		return &jvalue{kind: 'n', str: string(t)}, nil
	case bool:
		return &jvalue{kind: 'b', b: t}, nil
	case nil:
		return &jvalue{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// encode appends the compact JSON text of v (members in their order).
func (v *jvalue) encode(buf []byte) []byte {
	switch v.kind {
	case 'o':
		buf = append(buf, '{')
		for i, m := range v.obj {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSONString(buf, m.key)
			buf = append(buf, ':')
			buf = m.val.encode(buf)
		}
		return append(buf, '}')
	case 'a':
		buf = append(buf, '[')
		for i, e := range v.arr {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = e.encode(buf)
		}
		return append(buf, ']')
	case 's':
		return appendJSONString(buf, v.str)
	case 'n':
		return append(buf, v.str...)
	case 'b':
		if v.b {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	}
	return append(buf, "null"...)
}

// appendJSONString appends s as a JSON string, escaping only what JSON
// requires (quote, backslash, control characters); other characters stay raw
// UTF-8, which is how a model writes them.
func appendJSONString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	s = strings.ToValidUTF8(s, "\uFFFD")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			buf = append(buf, '\\', c)
		case c == '\n':
			buf = append(buf, '\\', 'n')
		case c == '\r':
			buf = append(buf, '\\', 'r')
		case c == '\t':
			buf = append(buf, '\\', 't')
		case c < 0x20:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			buf = append(buf, c)
		}
	}
	return append(buf, '"')
}
