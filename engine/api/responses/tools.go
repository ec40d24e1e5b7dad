package responses

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/turn"
)

// Responses tools come in more kinds than chat tools: function tools,
// namespaces grouping function and custom tools (Codex sends them), custom
// (freeform text) tools, and hosted tools the provider runs (web_search,
// file_search, code_interpreter, ...). The model sees them flattened into
// function tools: a namespace member as "NAMESPACE.NAME", a custom tool as
// a function of one string "input". Hosted tools are left out, since
// nothing here can run them. Calls are mapped back to the items the
// client expects (function_call with its namespace, custom_tool_call).

// tool is one entry of a Responses request's tools.
type tool struct {
	Type        string            `json:"type"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Parameters  json.RawMessage   `json:"parameters"`
	Tools       []json.RawMessage `json:"tools"`
}

// origin is where a flattened tool came from.
type origin struct {
	namespace, name string
	custom          bool
}

// flatName is the name the model sees for a namespace member.
func flatName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "." + name
}

// responsesTools flattens the request's tools; dropped lists the hosted
// tool types left out.
func flatTools(raw []json.RawMessage) (tools []chat.Tool, origins map[string]origin, dropped []string, err error) {
	origins = map[string]origin{}
	var add func(param, namespace string, raw json.RawMessage) error
	add = func(param, namespace string, raw json.RawMessage) error {
		var t tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return apiwire.Invalid(param, "%s must be a tool object", param)
		}
		switch t.Type {
		case "namespace":
			if namespace != "" {
				return apiwire.Invalid(param+".type", "namespaces do not nest")
			}
			if !turn.ValidName(t.Name) {
				return apiwire.Invalid(param+".name", "the namespace name %q must be 1-64 characters of a-z, A-Z, 0-9, _, . and -", t.Name)
			}
			for j, member := range t.Tools {
				if err := add(fmt.Sprintf("%s.tools[%d]", param, j), t.Name, member); err != nil {
					return err
				}
			}
			return nil
		case "function", "custom":
		default:
			dropped = append(dropped, t.Type)
			return nil
		}
		name := flatName(namespace, t.Name)
		fn := map[string]any{"name": name}
		if t.Description != "" {
			fn["description"] = t.Description
		}
		if t.Type == "custom" {
			fn["parameters"] = map[string]any{"type": "object", "properties": map[string]any{"input": map[string]any{"type": "string"}}, "required": []any{"input"}}
		} else if len(t.Parameters) > 0 && !bytes.Equal(t.Parameters, []byte("null")) {
			var p map[string]any
			if err := json.Unmarshal(t.Parameters, &p); err != nil {
				return apiwire.Invalid(param+".parameters", "parameters must be a JSON Schema object")
			}
			fn["parameters"] = p
		}
		tools = append(tools, chat.Tool{"type": "function", "function": fn})
		origins[name] = origin{namespace: namespace, name: t.Name, custom: t.Type == "custom"}
		return nil
	}
	for i, r := range raw {
		if err := add(fmt.Sprintf("tools[%d]", i), "", r); err != nil {
			return nil, nil, nil, err
		}
	}
	return tools, origins, dropped, nil
}

// hostedCallItem reports the input items of hosted tools' calls, which
// carry nothing the model reads here.
func hostedCallItem(typ string) bool {
	switch typ {
	case "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
		"computer_call", "computer_call_output", "mcp_list_tools", "item_reference":
		return true
	}
	return false
}

// callItem turns a call the model made into the Responses output item the
// client expects, by the tool's origin.
func callItem(c chat.ToolCall, origins map[string]origin) map[string]any {
	args, _ := c.Function.Arguments.(string)
	o, ok := origins[c.Function.Name]
	if !ok {
		o = origin{name: c.Function.Name}
	}
	var item map[string]any
	if o.custom {
		var in struct {
			Input string `json:"input"`
		}
		json.Unmarshal([]byte(args), &in)
		item = map[string]any{"type": "custom_tool_call", "id": apiwire.NewID("ctc_"), "call_id": c.ID, "name": o.name, "input": in.Input, "status": "completed"}
	} else {
		item = map[string]any{"type": "function_call", "id": apiwire.NewID("fc_"), "call_id": c.ID, "name": o.name, "arguments": args, "status": "completed"}
	}
	if o.namespace != "" {
		item["namespace"] = o.namespace
	}
	return item
}

// flatToolChoice names a namespaced or custom tool in tool_choice the way
// the model sees it: {"type":"function","namespace":"n","name":"f"} and
// {"type":"custom","name":"f"} become functions "n.f" and "f".
func flatToolChoice(raw json.RawMessage) json.RawMessage {
	var c struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	if json.Unmarshal(raw, &c) != nil || (c.Type != "custom" && c.Namespace == "") {
		return raw
	}
	out, _ := json.Marshal(map[string]string{"type": "function", "name": flatName(c.Namespace, c.Name)})
	return out
}
