package apiwire

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
)

// DecodeJSON decodes one JSON object.
func DecodeJSON(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Invalid("", "the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			field := jsonField(te.Field)
			if field == "" {
				field = "body"
			}
			return Invalid(field, "%s must be %s, found a JSON %s", field, jsonKind(te.Type.Kind().String()), te.Value)
		case errors.As(err, &se):
			return Invalid("", "the request body is not valid JSON: %v (at byte %d)", err, se.Offset)
		}
		return Invalid("", "%v", err)
	}
	if dec.More() {
		return Invalid("", "the request body has data after the JSON object")
	}
	return nil
}

// jsonField is a decoding error's field path as the JSON names it: the
// names of embedded structs (Go's, capitalized) are left out.
func jsonField(path string) string {
	for {
		head, rest, ok := strings.Cut(path, ".")
		if !ok || head == "" || head[0] < 'A' || head[0] > 'Z' {
			return path
		}
		path = rest
	}
}

// jsonKind names a Go kind as JSON does.
func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint64", "float64", "float32":
		return "a number"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "of another type"
}

// NewID is prefix and 24 random hex digits: the id of a completion,
// message or response.
func NewID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// ToolUseID turns a call id into Anthropic's form (toolu_...).
func ToolUseID(id string) string { return "toolu_" + strings.TrimPrefix(id, "call_") }
