package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/spoolhq/spool/engine/chat/internal/jinja"
)

// The template engine sees Python-like values: dicts keep insertion order,
// as Python's do, because tojson and dict.items() expose it. Values that
// arrive as JSON text keep the order of that text. Go maps have no order,
// so their keys are emitted in the order OpenAI clients and vLLM use for
// tool definitions (type, function, name, description, parameters, ...)
// and then alphabetically; the property names inside "properties" are
// alphabetical.

// keyRank orders the keys that a Go map emits first; -1 means none.
func keyRank(k string) int {
	switch k {
	case "type":
		return 0
	case "function":
		return 1
	case "name":
		return 2
	case "title":
		return 3
	case "description":
		return 4
	case "parameters":
		return 5
	case "enum":
		return 6
	case "const":
		return 7
	case "default":
		return 8
	case "items":
		return 9
	case "properties":
		return 10
	case "required":
		return 11
	case "additionalProperties":
		return 12
	}
	return -1
}

// isNameMapKey reports whether k's object value maps user-chosen names
// to schemas; such maps are sorted without priority.
func isNameMapKey(k string) bool {
	switch k {
	case "properties", "patternProperties", "$defs", "definitions":
		return true
	}
	return false
}

// messageValue converts one message into the dict a template sees.
func messageValue(m Message) (jinja.Value, error) {
	d := jinja.NewDict()
	dict := d.AsDict()
	dict.Set("role", jinja.NewString(m.Role))
	content, err := contentValue(m.Content)
	if err != nil {
		return jinja.Value{}, fmt.Errorf("%s message content: %w", m.Role, err)
	}
	dict.Set("content", content)
	if m.ReasoningContent != "" {
		dict.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			v, err := toolCallValue(tc)
			if err != nil {
				return jinja.Value{}, fmt.Errorf("%s message tool call %d: %w", m.Role, i, err)
			}
			calls[i] = v
		}
		dict.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		dict.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.Name != "" {
		dict.Set("name", jinja.NewString(m.Name))
	}
	return d, nil
}

// contentValue converts message content. Null content becomes the empty
// string, as vLLM passes it, so that templates do not print "None".
func contentValue(c any) (jinja.Value, error) {
	switch c := c.(type) {
	case nil:
		return jinja.NewString(""), nil
	case string:
		return jinja.NewString(c), nil
	case []ContentPart:
		parts := make([]jinja.Value, len(c))
		for i, p := range c {
			d := jinja.NewDict()
			d.AsDict().Set("type", jinja.NewString(p.Type))
			if p.Type == "text" || p.Text != "" {
				d.AsDict().Set("text", jinja.NewString(p.Text))
			}
			parts[i] = d
		}
		return jinja.NewList(parts), nil
	}
	return goValue(c, false)
}

func toolCallValue(tc ToolCall) (jinja.Value, error) {
	fn := jinja.NewDict()
	fn.AsDict().Set("name", jinja.NewString(tc.Function.Name))
	args, err := argumentsValue(tc.Function.Arguments)
	if err != nil {
		return jinja.Value{}, fmt.Errorf("arguments of %q: %w", tc.Function.Name, err)
	}
	fn.AsDict().Set("arguments", args)

	d := jinja.NewDict()
	if tc.ID != "" {
		d.AsDict().Set("id", jinja.NewString(tc.ID))
	}
	typ := tc.Type
	if typ == "" {
		typ = "function"
	}
	d.AsDict().Set("type", jinja.NewString(typ))
	d.AsDict().Set("function", fn)
	return d, nil
}

// argumentsValue turns tool-call arguments into a dict, as vLLM does
// before rendering: templates iterate arguments.items(). A string that is
// not a JSON object stays a string; missing arguments are an empty dict.
func argumentsValue(a any) (jinja.Value, error) {
	switch a := a.(type) {
	case nil:
		return jinja.NewDict(), nil
	case string:
		if v, err := jsonValue([]byte(a)); err == nil && v.IsDict() {
			return v, nil
		}
		return jinja.NewString(a), nil
	case json.RawMessage:
		return jsonValue(a)
	}
	return goValue(a, false)
}

// goValue converts a Go value (as produced by encoding/json, or built by
// hand) into a template value. nameMap marks a map of user-chosen names.
func goValue(v any, nameMap bool) (jinja.Value, error) {
	switch v := v.(type) {
	case nil:
		return jinja.None(), nil
	case jinja.Value:
		return v, nil
	case bool:
		return jinja.NewBool(v), nil
	case string:
		return jinja.NewString(v), nil
	case int:
		return jinja.NewInt(int64(v)), nil
	case int32:
		return jinja.NewInt(int64(v)), nil
	case int64:
		return jinja.NewInt(v), nil
	case float32:
		return floatValue(float64(v)), nil
	case float64:
		return floatValue(v), nil
	case json.Number:
		return numberValue(v), nil
	case json.RawMessage:
		return jsonValue(v)
	case []any:
		items := make([]jinja.Value, len(v))
		for i, item := range v {
			iv, err := goValue(item, false)
			if err != nil {
				return jinja.Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
			items[i] = iv
		}
		return jinja.NewList(items), nil
	case []string:
		items := make([]jinja.Value, len(v))
		for i, s := range v {
			items[i] = jinja.NewString(s)
		}
		return jinja.NewList(items), nil
	case []map[string]any:
		items := make([]jinja.Value, len(v))
		for i, m := range v {
			iv, err := goValue(m, false)
			if err != nil {
				return jinja.Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
			items[i] = iv
		}
		return jinja.NewList(items), nil
	case map[string]any:
		d := jinja.NewDict()
		for _, k := range mapKeys(v, nameMap) {
			kv, err := goValue(v[k], isNameMapKey(k) && !nameMap)
			if err != nil {
				return jinja.Value{}, fmt.Errorf("%s: %w", k, err)
			}
			d.AsDict().Set(k, kv)
		}
		return d, nil
	case []Message:
		items := make([]jinja.Value, len(v))
		for i, m := range v {
			mv, err := messageValue(m)
			if err != nil {
				return jinja.Value{}, err
			}
			items[i] = mv
		}
		return jinja.NewList(items), nil
	}
	return jinja.Value{}, fmt.Errorf("unsupported value of type %T", v)
}

// mapKeys orders a Go map's keys: priority keys first (unless the map
// holds user-chosen names), then the rest sorted.
func mapKeys(m map[string]any, nameMap bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, rj := -1, -1
		if !nameMap {
			ri, rj = keyRank(keys[i]), keyRank(keys[j])
		}
		switch {
		case ri >= 0 && rj >= 0:
			return ri < rj
		case ri >= 0 || rj >= 0:
			return ri >= 0
		}
		return keys[i] < keys[j]
	})
	return keys
}

// floatValue maps a float64 from encoding/json: integral values within the
// exactly representable range become ints, since JSON text such as 2
// decodes to float64 and Python would keep it an int.
func floatValue(f float64) jinja.Value {
	if f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		return jinja.NewInt(int64(f))
	}
	return jinja.NewFloat(f)
}

// numberValue maps JSON number text the way Python's json.loads does: no
// fraction or exponent means int.
func numberValue(n json.Number) jinja.Value {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := n.Int64(); err == nil {
			return jinja.NewInt(i)
		}
	}
	if f, err := n.Float64(); err == nil {
		return jinja.NewFloat(f)
	}
	return jinja.NewString(s)
}

// jsonValue decodes one JSON value, keeping object key order.
func jsonValue(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jinja.Value{}, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

func decodeOrdered(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				key, ok := kt.(string)
				if !ok {
					return jinja.Value{}, fmt.Errorf("object key is %T, not a string", kt)
				}
				v, err := decodeOrdered(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				d.AsDict().Set(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return d, nil
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeOrdered(dec)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return jinja.NewList(items), nil
		}
		return jinja.Value{}, fmt.Errorf("unexpected delimiter %q", t)
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		return numberValue(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}
