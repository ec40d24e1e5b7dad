package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/tokenizer"
)

// A forced tool choice (tool_choice "required" or a named function) is
// enforced by constrained decoding of GLM's call markup:
//
//	<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>…</tool_call>
//
// NAME is one of the tools, each KEY a parameter not yet given (the
// required ones first), and the call closes only once every required
// parameter is there. A string value
// is raw text without '<'; any other value is JSON constrained by the
// parameter's schema (through the response-format compiler). The markup
// tags are single tokens of the GLM vocabulary.

// maxRawValueTokens bounds a raw string argument.
const maxRawValueTokens = 1024

// toolVocab is the per-tokenizer index the tool-call constraint uses.
type toolVocab struct {
	tokens [][]byte
	// plain marks tokens that may appear in a raw value: not special,
	// not empty, no '<'.
	plain                                          []uint64
	argKey, argKeyEnd, argValue, argValueEnd, done int
	eos                                            []int
}

func newToolVocab(tok *tokenizer.Tokenizer, eos []int) *toolVocab {
	n := tok.VocabSize()
	v := &toolVocab{tokens: make([][]byte, n), plain: make([]uint64, (n+63)/64), eos: eos}
	for id := range n {
		b, ok := tok.TokenBytes(id)
		if !ok || tok.IsSpecial(id) || slices.Contains(eos, id) {
			continue
		}
		v.tokens[id] = b
		if len(b) > 0 && !bytes.ContainsRune(b, '<') {
			v.plain[id/64] |= 1 << (id % 64)
		}
	}
	id := func(s string) int {
		if i, ok := tok.TokenID(s); ok {
			return i
		}
		return -1
	}
	v.argKey, v.argKeyEnd = id("<arg_key>"), id("</arg_key>")
	v.argValue, v.argValueEnd, v.done = id("<arg_value>"), id("</arg_value>"), id(toolCallClose)
	return v
}

// usable reports whether the vocabulary has GLM's markup tokens.
func (v *toolVocab) usable() bool {
	return v.argKey >= 0 && v.argKeyEnd >= 0 && v.argValue >= 0 && v.argValueEnd >= 0 && v.done >= 0
}

// toolSpec is what the constraint needs of one tool.
type toolSpec struct {
	name     string
	params   []string
	required []string
	schemas  map[string]json.RawMessage
}

func toolSpecs(tools []chat.Tool) []toolSpec {
	var out []toolSpec
	for _, t := range tools {
		fn, _ := t["function"].(map[string]any)
		name, _ := fn["name"].(string)
		spec := toolSpec{name: name, schemas: map[string]json.RawMessage{}}
		params, _ := fn["parameters"].(map[string]any)
		props, _ := params["properties"].(map[string]any)
		for k, v := range props {
			spec.params = append(spec.params, k)
			if raw, err := json.Marshal(v); err == nil {
				spec.schemas[k] = raw
			}
		}
		slices.Sort(spec.params)
		req, _ := params["required"].([]any)
		for _, r := range req {
			if s, ok := r.(string); ok && slices.Contains(spec.params, s) {
				spec.required = append(spec.required, s)
			}
		}
		out = append(out, spec)
	}
	return out
}

// rawString reports whether a parameter's schema makes its value raw text.
func rawString(schema json.RawMessage) bool {
	var s struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return true
	}
	switch t := s.Type.(type) {
	case nil:
		return true
	case string:
		return t == "string"
	case []any:
		return slices.Contains(t, any("string"))
	}
	return true
}

type toolPhase int

const (
	phaseName      toolPhase = iota // writing the function name
	phaseArgs                       // expecting <arg_key> or </tool_call>
	phaseKey                        // writing a parameter name
	phaseKeyEnd                     // expecting <arg_value>
	phaseRawValue                   // writing a raw string value
	phaseJSONValue                  // writing a JSON value
	phaseDone
)

// toolConstraint implements scheduler.Constraint for one forced call.
type toolConstraint struct {
	v       *toolVocab
	specs   []toolSpec
	compile ConstraintCompiler

	phase  toolPhase
	text   string    // name or key written so far
	tool   *toolSpec // chosen tool
	used   []string  // parameters given
	key    string    // the parameter being written
	value  scheduler.Constraint
	tokens int // tokens of the current raw value
}

// newToolConstraint starts after "<tool_call>" (name == "") or after
// "<tool_call>name".
func newToolConstraint(v *toolVocab, tools []chat.Tool, name string, compile ConstraintCompiler) *toolConstraint {
	c := &toolConstraint{v: v, specs: toolSpecs(tools), compile: compile}
	if name != "" {
		for i := range c.specs {
			if c.specs[i].name == name {
				c.tool = &c.specs[i]
			}
		}
		c.phase = phaseArgs
	}
	return c
}

func set(mask []uint64, id int) {
	if id >= 0 && id/64 < len(mask) {
		mask[id/64] |= 1 << (id % 64)
	}
}

// extend allows every token that keeps text a prefix of a candidate.
func (c *toolConstraint) extend(mask []uint64, candidates []string) {
	for id, b := range c.v.tokens {
		if len(b) == 0 || c.v.plain[id/64]&(1<<(id%64)) == 0 {
			continue
		}
		next := c.text + string(b)
		for _, cand := range candidates {
			if strings.HasPrefix(cand, next) {
				set(mask, id)
				break
			}
		}
	}
}

// unused lists the parameters that may come next: the required ones not
// given yet, or once they are all there, the optional ones not given.
func (c *toolConstraint) unused() []string {
	var out []string
	for _, p := range c.tool.required {
		if !slices.Contains(c.used, p) {
			out = append(out, p)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, p := range c.tool.params {
		if !slices.Contains(c.used, p) {
			out = append(out, p)
		}
	}
	return out
}

func (c *toolConstraint) canClose() bool {
	for _, r := range c.tool.required {
		if !slices.Contains(c.used, r) {
			return false
		}
	}
	return true
}

// Mask implements scheduler.Constraint.
func (c *toolConstraint) Mask(mask []uint64) {
	switch c.phase {
	case phaseName:
		var names []string
		for _, s := range c.specs {
			names = append(names, s.name)
			if s.name == c.text {
				if len(s.params) > 0 {
					set(mask, c.v.argKey)
				}
				if len(s.required) == 0 {
					set(mask, c.v.done)
				}
			}
		}
		c.extend(mask, names)
	case phaseArgs:
		if len(c.unused()) > 0 {
			set(mask, c.v.argKey)
		}
		if c.canClose() {
			set(mask, c.v.done)
		}
	case phaseKey:
		unused := c.unused()
		if slices.Contains(unused, c.text) {
			set(mask, c.v.argKeyEnd)
		}
		c.extend(mask, unused)
	case phaseKeyEnd:
		set(mask, c.v.argValue)
	case phaseRawValue:
		if c.tokens < maxRawValueTokens {
			copy(mask, c.v.plain)
		}
		set(mask, c.v.argValueEnd)
	case phaseJSONValue:
		c.value.Mask(mask)
		for _, e := range c.v.eos {
			if e/64 < len(mask) {
				mask[e/64] &^= 1 << (e % 64)
			}
		}
		if c.value.Done() {
			set(mask, c.v.argValueEnd)
		}
	}
}

// Accept implements scheduler.Constraint.
func (c *toolConstraint) Accept(id int) error {
	switch c.phase {
	case phaseName:
		if id == c.v.argKey || id == c.v.done {
			for i := range c.specs {
				if c.specs[i].name == c.text {
					c.tool = &c.specs[i]
				}
			}
			c.text = ""
			c.phase = phaseKey
			if id == c.v.done {
				c.phase = phaseDone
			}
			return nil
		}
		c.text += string(c.v.tokens[id])
	case phaseArgs:
		if id == c.v.done {
			c.phase = phaseDone
		} else {
			c.phase, c.text = phaseKey, ""
		}
	case phaseKey:
		if id == c.v.argKeyEnd {
			c.key, c.phase = c.text, phaseKeyEnd
			c.used = append(c.used, c.text)
			return nil
		}
		c.text += string(c.v.tokens[id])
	case phaseKeyEnd:
		c.phase, c.tokens, c.value = phaseRawValue, 0, nil
		schema := c.tool.schemas[c.key]
		if c.compile != nil && !rawString(schema) {
			if v, err := c.compile(schema); err == nil {
				c.value, c.phase = v, phaseJSONValue
			}
		}
	case phaseRawValue:
		if id == c.v.argValueEnd {
			c.phase = phaseArgs
			return nil
		}
		c.tokens++
	case phaseJSONValue:
		if id == c.v.argValueEnd {
			c.phase, c.value = phaseArgs, nil
			return nil
		}
		return c.value.Accept(id)
	case phaseDone:
		return errToolCallDone
	}
	return nil
}

// Done implements scheduler.Constraint.
func (c *toolConstraint) Done() bool { return c.phase == phaseDone }

var errToolCallDone = &apiError{Status: 500, Type: "server_error", Message: "the tool call is complete"}
