package turn

import (
	"fmt"
	"strings"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
)

// The checks every API makes of the parts of a turn it translated: the
// conversation, the tools, the stop strings. Each refusal is a 400 that
// names the request's field (param).

// MaxStops bounds the stop strings of one request.
const MaxStops = 16

// CheckMessages checks a conversation: at least one message, each of a
// known role, content parts of text only.
func CheckMessages(param string, msgs []chat.Message) error {
	if len(msgs) == 0 {
		return apiwire.Invalid(param, "%s must hold at least one message", param)
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return apiwire.Invalid(fmt.Sprintf("%s[%d].role", param, i), "message %d has the role %q; expected system, developer, user, assistant or tool", i, m.Role)
		}
		if err := CheckContent(fmt.Sprintf("%s[%d]", param, i), m); err != nil {
			return err
		}
	}
	return nil
}

// CheckContent checks that a message's content parts are text: this model
// reads text only.
func CheckContent(param string, m chat.Message) error {
	if parts, ok := m.Content.([]chat.ContentPart); ok {
		for j, p := range parts {
			if p.Type != "text" && p.Type != "input_text" && p.Type != "output_text" {
				return apiwire.Invalid(fmt.Sprintf("%s.content[%d].type", param, j), "content parts of type %q are not supported: %s reads text only", p.Type, "this model")
			}
		}
	}
	return nil
}

// CheckTools checks tool definitions: functions, each named validly and
// once, with a JSON Schema object for parameters.
func CheckTools(param string, tools []chat.Tool) error {
	seen := map[string]bool{}
	for i, t := range tools {
		if typ, _ := t["type"].(string); typ != "function" {
			return apiwire.Invalid(fmt.Sprintf("%s[%d].type", param, i), `tool %d: only tools of type "function" are supported`, i)
		}
		fn, _ := t["function"].(map[string]any)
		if fn == nil {
			return apiwire.Invalid(fmt.Sprintf("%s[%d].function", param, i), "tool %d has no function object", i)
		}
		name, _ := fn["name"].(string)
		if !ValidName(name) {
			return apiwire.Invalid(fmt.Sprintf("%s[%d].function.name", param, i), "tool %d: the function name %q must be 1-64 characters of a-z, A-Z, 0-9, _, . and -", i, name)
		}
		if seen[name] {
			return apiwire.Invalid(fmt.Sprintf("%s[%d].function.name", param, i), "the function %q is declared twice", name)
		}
		seen[name] = true
		if p, ok := fn["parameters"]; ok && p != nil {
			if _, ok := p.(map[string]any); !ok {
				return apiwire.Invalid(fmt.Sprintf("%s[%d].function.parameters", param, i), "tool %q: parameters must be a JSON Schema object", name)
			}
		}
	}
	return nil
}

// ToolNamed is the tool of tools named name, nil when there is none.
func ToolNamed(tools []chat.Tool, name string) chat.Tool {
	for _, t := range tools {
		if fn, _ := t["function"].(map[string]any); fn != nil && fn["name"] == name {
			return t
		}
	}
	return nil
}

// CheckStops checks stop strings: at most MaxStops, none empty.
func CheckStops(param string, list []string) ([]string, error) {
	if len(list) > MaxStops {
		return nil, apiwire.Invalid(param, "%s has %d strings; at most %d are allowed", param, len(list), MaxStops)
	}
	for _, s := range list {
		if s == "" {
			return nil, apiwire.Invalid(param, "%s must not contain an empty string", param)
		}
	}
	return list, nil
}

// CheckMaxTokens checks a requested output limit (nil: none): at least 1.
func CheckMaxTokens(param string, requested *int) (*int, error) {
	if requested != nil && *requested <= 0 {
		return nil, apiwire.Invalid(param, "%s must be at least 1, got %d", param, *requested)
	}
	return requested, nil
}

// ValidName reports whether a tool or schema name is 1..64 characters of
// [A-Za-z0-9_.-].
func ValidName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == ""
}
