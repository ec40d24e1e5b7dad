package glm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"

	"github.com/spoolhq/spool/engine/chat"
)

// GLM writes a tool call as
//
//	<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>…</tool_call>
//
// with optional whitespace between the parts. The rules below follow the
// Colibri gateway: the name is the leading run of [A-Za-z0-9_.-]; values
// are coerced by the tool's declared JSON-schema type; an unclosed call at
// the end of the reply is kept only when it holds a complete argument pair
// or is exactly the name of a declared tool without parameters.

const (
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
	argKeyOpen    = "<arg_key>"
	argKeyClose   = "</arg_key>"
	argValueOpen  = "<arg_value>"
	argValueClose = "</arg_value>"
)

// ForcedCall is the markup a prompt ends with to force a tool call: of
// any of the tools (name "") or of the one named.
func ForcedCall(name string) string { return toolCallOpen + name }

// ParsedCall is one tool call parsed from a reply.
type ParsedCall struct {
	Name string
	// Arguments is a JSON object text, keys in the order the model wrote
	// them.
	Arguments string
}

// ToolCall returns the call in the OpenAI message shape with the given id.
func (c ParsedCall) ToolCall(id string) chat.ToolCall {
	return chat.ToolCall{ID: id, Type: "function", Function: chat.FunctionCall{Name: c.Name, Arguments: c.Arguments}}
}

// NewCallID returns a tool-call id "call_" followed by 24 hex digits read
// from random (for example crypto/rand.Reader).
func NewCallID(random io.Reader) (string, error) {
	var b [12]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", fmt.Errorf("chat: reading random bytes for a call id: %w", err)
	}
	return "call_" + hex.EncodeToString(b[:]), nil
}

// ParseToolCalls extracts GLM tool calls from a reply. It should be given
// the visible part of the reply (see ReasoningSplitter); if text still
// holds a </think>, only what follows the first one is considered.
//
// content is the text outside the calls, with think tags removed and
// surrounding whitespace stripped. tools, when given, supply the
// JSON-schema property types that decide how each argument value is
// read: a string property keeps the raw text; other types take the value
// as JSON when it parses (booleans are refused for integer and number
// properties); undeclared arguments are read as JSON when they parse.
//
// err reports a closed call whose name is missing; content and calls
// still hold everything else that was parsed.
func ParseToolCalls(text string, tools []chat.Tool) (content string, calls []ParsedCall, err error) {
	if i := strings.Index(text, thinkClose); i >= 0 {
		text = text[i+len(thinkClose):]
	}
	var visible strings.Builder
	var errs []string
	for text != "" {
		open := strings.Index(text, toolCallOpen)
		if open < 0 {
			visible.WriteString(text)
			break
		}
		visible.WriteString(text[:open])
		body := text[open+len(toolCallOpen):]
		closed := false
		if end := strings.Index(body, toolCallClose); end >= 0 {
			text = body[end+len(toolCallClose):]
			body = body[:end]
			closed = true
		} else {
			text = ""
		}
		call, ok, perr := parseCall(body, closed, tools)
		if perr != nil {
			errs = append(errs, perr.Error())
		}
		if ok {
			calls = append(calls, call)
		}
	}
	content = visible.String()
	content = strings.ReplaceAll(content, thinkOpen, "")
	content = strings.ReplaceAll(content, thinkClose, "")
	content = strings.TrimFunc(content, unicode.IsSpace)
	if len(errs) > 0 {
		err = fmt.Errorf("chat: malformed tool call: %s", strings.Join(errs, "; "))
	}
	return content, calls, err
}

type argPair struct{ key, value string }

// parseCall parses the body of one <tool_call> box.
func parseCall(body string, closed bool, tools []chat.Tool) (ParsedCall, bool, error) {
	rest := strings.TrimLeftFunc(body, unicode.IsSpace)
	n := 0
	for n < len(rest) && isNameByte(rest[n]) {
		n++
	}
	name := rest[:n]
	if name == "" {
		if closed {
			return ParsedCall{}, false, fmt.Errorf("call %.40q has no function name", body)
		}
		return ParsedCall{}, false, nil
	}
	pairs := argPairs(rest[n:])
	schema := toolProperties(tools, name)
	if !closed {
		zeroArg := schema.declared && len(schema.props) == 0 && strings.TrimFunc(body, unicode.IsSpace) == name
		if len(pairs) == 0 && !zeroArg {
			return ParsedCall{}, false, nil
		}
	}

	var keys []string
	values := map[string]json.RawMessage{}
	for _, p := range pairs {
		if _, seen := values[p.key]; !seen {
			keys = append(keys, p.key)
		}
		values[p.key] = coerceValue(p.value, schema.props[p.key])
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(encodeJSONString(k))
		b.WriteByte(':')
		b.Write(values[k])
	}
	b.WriteByte('}')
	return ParsedCall{Name: name, Arguments: b.String()}, true, nil
}

// argPairs returns the complete <arg_key>k</arg_key><arg_value>v</arg_value>
// pairs in s; keys are trimmed, values kept as written.
func argPairs(s string) []argPair {
	var pairs []argPair
	for {
		k := strings.Index(s, argKeyOpen)
		if k < 0 {
			return pairs
		}
		s = s[k+len(argKeyOpen):]
		ke := strings.Index(s, argKeyClose)
		if ke < 0 {
			return pairs
		}
		key := strings.TrimFunc(s[:ke], unicode.IsSpace)
		s = s[ke+len(argKeyClose):]
		after := strings.TrimLeftFunc(s, unicode.IsSpace)
		if !strings.HasPrefix(after, argValueOpen) {
			continue
		}
		after = after[len(argValueOpen):]
		ve := strings.Index(after, argValueClose)
		if ve < 0 {
			return pairs
		}
		pairs = append(pairs, argPair{key: key, value: after[:ve]})
		s = after[ve+len(argValueClose):]
	}
}

func isNameByte(c byte) bool {
	return c == '_' || c == '.' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// toolSchema is what ParseToolCalls needs of one declared tool: the
// declared types of each property.
type toolSchema struct {
	declared bool
	props    map[string][]string
}

// toolProperties finds the tool named name and returns its properties'
// declared types (without "null").
func toolProperties(tools []chat.Tool, name string) toolSchema {
	params, ok := toolParameters(tools, name)
	if !ok {
		return toolSchema{}
	}
	s := toolSchema{declared: true, props: map[string][]string{}}
	props, _ := params["properties"].(map[string]any)
	for k, p := range props {
		s.props[k] = schemaTypes(p, params, 0)
	}
	return s
}

// toolParameters returns the parameters schema of the tool named name.
func toolParameters(tools []chat.Tool, name string) (map[string]any, bool) {
	for _, tool := range tools {
		fn, ok := tool["function"].(map[string]any)
		if !ok {
			fn = tool
		}
		if n, _ := fn["name"].(string); n == name {
			params, _ := fn["parameters"].(map[string]any)
			return params, true
		}
	}
	return nil, false
}

// schemaTypes collects the types a property schema declares: its type,
// the types of its enum and const values, and those of its anyOf, oneOf
// and allOf members and $ref target (resolved against root, the
// parameters schema). It agrees with grammar.CompileArguments: an
// argument is raw text exactly when "string" is among them.
func schemaTypes(schema any, root map[string]any, depth int) []string {
	m, ok := schema.(map[string]any)
	if !ok || depth > 8 {
		return nil
	}
	var types []string
	switch t := m["type"].(type) {
	case string:
		types = append(types, t)
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
	}
	if len(types) == 0 {
		values, _ := m["enum"].([]any)
		if c, ok := m["const"]; ok {
			values = append(values, c)
		}
		for _, v := range values {
			types = append(types, valueType(v))
		}
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := m[key].([]any); ok {
			for _, alt := range alts {
				types = append(types, schemaTypes(alt, root, depth+1)...)
			}
		}
	}
	if ref, ok := m["$ref"].(string); ok {
		types = append(types, schemaTypes(resolveRef(ref, root), root, depth+1)...)
	}
	return slices.DeleteFunc(types, func(t string) bool { return t == "null" })
}

// resolveRef resolves "#", "#/$defs/NAME" and "#/definitions/NAME".
func resolveRef(ref string, root map[string]any) any {
	if ref == "#" {
		return root
	}
	for _, prefix := range []string{"#/$defs/", "#/definitions/"} {
		if name, ok := strings.CutPrefix(ref, prefix); ok {
			defs, _ := root[strings.Trim(prefix[1:], "/")].(map[string]any)
			return defs[strings.NewReplacer("~1", "/", "~0", "~").Replace(name)]
		}
	}
	return nil
}

// valueType is the JSON Schema type of a decoded JSON value.
func valueType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64, json.Number:
		return "number"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "null"
}

// MissingArguments lists the required parameters of the called tool that
// a parsed call lacks (none for an undeclared tool).
func MissingArguments(c ParsedCall, tools []chat.Tool) []string {
	params, ok := toolParameters(tools, c.Name)
	if !ok {
		return nil
	}
	required, _ := params["required"].([]any)
	var args map[string]json.RawMessage
	if json.Unmarshal([]byte(c.Arguments), &args) != nil {
		args = nil
	}
	var missing []string
	for _, r := range required {
		if k, ok := r.(string); ok {
			if _, has := args[k]; !has {
				missing = append(missing, k)
			}
		}
	}
	return missing
}

// coerceValue returns the JSON for one argument value given the
// property's declared types.
func coerceValue(raw string, types []string) json.RawMessage {
	if slices.Contains(types, "string") {
		return encodeJSONString(raw)
	}
	trimmed := bytes.TrimSpace([]byte(raw))
	if !json.Valid(trimmed) {
		return encodeJSONString(raw)
	}
	numeric := len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return t != "integer" && t != "number" })
	if numeric && (bytes.Equal(trimmed, []byte("true")) || bytes.Equal(trimmed, []byte("false"))) {
		return encodeJSONString(raw)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, trimmed); err != nil {
		return encodeJSONString(raw)
	}
	return b.Bytes()
}

// encodeJSONString encodes s without HTML escaping.
func encodeJSONString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail; invalid UTF-8 becomes U+FFFD
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
