package glm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/grammar"
	"github.com/spoolhq/spool/engine/tokenizer"
)

// A forced tool choice (tool_choice "required" or a named function) is
// enforced by constrained decoding of GLM's call markup:
//
//	<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>…</tool_call>
//
// NAME is one of the tools, each KEY a declared parameter not yet given
// (the required ones first), and the call closes only once every required
// parameter is there. Each VALUE is decoded under its parameter's schema,
// compiled with the tool's whole parameters schema by the response-format
// compiler (grammar.CompileArguments): a string parameter is raw text
// (enum, const, minLength and maxLength enforced), any other JSON. The
// markup tags are single tokens of the GLM vocabulary.

// ToolChoiceError is a forced tool choice the constraint cannot enforce:
// Param names the request field at fault (tools or tool_choice).
type ToolChoiceError struct {
	Param, Message string
}

func (e *ToolChoiceError) Error() string { return e.Message }

// maxValueTokens bounds an argument value: past it, a value that is
// complete must end.
const maxValueTokens = 1024

// ToolVocab is the per-tokenizer index the tool-call constraint uses:
// build it once per tokenizer.
type ToolVocab struct {
	tokens [][]byte
	// plain marks tokens that may appear in a key or an unconstrained raw
	// value: not special, not empty, no '<'.
	plain                                          []uint64
	argKey, argKeyEnd, argValue, argValueEnd, done int
	eos                                            []int
}

// NewToolVocab indexes tok's vocabulary; eos are the model's
// end-of-sequence ids.
func NewToolVocab(tok *tokenizer.Tokenizer, eos []int) *ToolVocab {
	n := tok.VocabSize()
	v := &ToolVocab{tokens: make([][]byte, n), plain: make([]uint64, (n+63)/64), eos: eos}
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

// Usable reports whether the vocabulary has GLM's markup tokens, each a
// single token: without them a forced call is not constrained.
func (v *ToolVocab) Usable() bool {
	return v.argKey >= 0 && v.argKeyEnd >= 0 && v.argValue >= 0 && v.argValueEnd >= 0 && v.done >= 0
}

// toolSpec is what the constraint needs of one tool.
type toolSpec struct {
	name string
	args *grammar.Arguments
}

func (s *toolSpec) arg(name string) *grammar.Argument {
	for i := range s.args.Props {
		if s.args.Props[i].Name == name {
			return &s.args.Props[i]
		}
	}
	return nil
}

// toolSpecs compiles the parameters of the tools (only the one named
// name, when set); a schema the compiler refuses is a 400 naming the tool.
func toolSpecs(tools []chat.Tool, name string) ([]toolSpec, error) {
	var out []toolSpec
	for _, t := range tools {
		fn, _ := t["function"].(map[string]any)
		n, _ := fn["name"].(string)
		if name != "" && n != name {
			continue
		}
		var raw []byte
		if p, ok := fn["parameters"]; ok && p != nil {
			var err error
			if raw, err = json.Marshal(p); err != nil {
				return nil, &ToolChoiceError{Param: "tools", Message: fmt.Sprintf("tool %q: parameters: %v", n, err)}
			}
		}
		args, err := grammar.CompileArguments(raw)
		if err != nil {
			return nil, &ToolChoiceError{Param: "tools", Message: fmt.Sprintf("tool %q: its arguments cannot be decoded under its parameters schema for a forced tool_choice: %v", n, err)}
		}
		out = append(out, toolSpec{name: n, args: args})
	}
	return out, nil
}

type toolPhase int

const (
	phaseName   toolPhase = iota // writing the function name
	phaseArgs                    // expecting <arg_key> or </tool_call>
	phaseKey                     // writing a parameter name
	phaseKeyEnd                  // expecting <arg_value>
	phaseValue                   // writing a value
	phaseDone
)

// ToolConstraint constrains the decoding of one forced call: it is a
// scheduler.Constraint (Mask, Accept, Done).
type ToolConstraint struct {
	v *ToolVocab
	// gv is the vocabulary argument values are decoded under; nil leaves
	// them unconstrained (raw text of plain tokens).
	gv    *grammar.Vocab
	specs []toolSpec

	phase  toolPhase
	text   string    // name or key written so far
	tool   *toolSpec // chosen tool
	used   []string  // parameters given
	value  *grammar.Matcher
	tokens int // tokens of the current value
}

// NewToolConstraint starts after ForcedCall(name): "<tool_call>" (name
// "": any of the tools) or "<tool_call>name". values is the grammar
// vocabulary argument values are decoded under (nil: raw text). A tool
// whose parameters cannot be compiled, or an unknown name, is a
// *ToolChoiceError.
func NewToolConstraint(v *ToolVocab, tools []chat.Tool, name string, values *grammar.Vocab) (*ToolConstraint, error) {
	specs, err := toolSpecs(tools, name)
	if err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, &ToolChoiceError{Param: "tool_choice", Message: fmt.Sprintf("tool_choice names the function %q, which is not among the tools", name)}
	}
	c := &ToolConstraint{v: v, gv: values, specs: specs}
	if name != "" {
		c.tool = &c.specs[0]
		c.phase = phaseArgs
	}
	return c, nil
}

func set(mask []uint64, id int) {
	if id >= 0 && id/64 < len(mask) {
		mask[id/64] |= 1 << (id % 64)
	}
}

// extend allows every token that keeps text a prefix of a candidate.
func (c *ToolConstraint) extend(mask []uint64, candidates []string) {
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
func (c *ToolConstraint) unused() []string {
	var req, opt []string
	for _, p := range c.tool.args.Props {
		switch {
		case slices.Contains(c.used, p.Name):
		case p.Required:
			req = append(req, p.Name)
		default:
			opt = append(opt, p.Name)
		}
	}
	if len(req) > 0 {
		return req
	}
	return opt
}

func (c *ToolConstraint) canClose() bool {
	for _, p := range c.tool.args.Props {
		if p.Required && !slices.Contains(c.used, p.Name) {
			return false
		}
	}
	return true
}

// Mask sets the tokens allowed next.
func (c *ToolConstraint) Mask(mask []uint64) {
	switch c.phase {
	case phaseName:
		var names []string
		for _, s := range c.specs {
			names = append(names, s.name)
			if s.name == c.text {
				if len(s.args.Props) > 0 {
					set(mask, c.v.argKey)
				}
				if !slices.ContainsFunc(s.args.Props, func(a grammar.Argument) bool { return a.Required }) {
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
	case phaseValue:
		if c.value == nil {
			if c.tokens < maxValueTokens {
				copy(mask, c.v.plain)
			}
			set(mask, c.v.argValueEnd)
			return
		}
		done := c.value.Done()
		if !done || c.tokens < maxValueTokens {
			c.value.Allowed(mask)
			for _, e := range c.v.eos {
				if e/64 < len(mask) {
					mask[e/64] &^= 1 << (e % 64)
				}
			}
		}
		if done {
			set(mask, c.v.argValueEnd)
		}
	}
}

// Accept takes the token decoded.
func (c *ToolConstraint) Accept(id int) error {
	switch c.phase {
	case phaseName:
		if id == c.v.argKey || id == c.v.done {
			for i := range c.specs {
				if c.specs[i].name == c.text {
					c.tool = &c.specs[i]
				}
			}
			if c.tool == nil {
				return errToolCallMarkup
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
			c.used = append(c.used, c.text)
			c.phase, c.tokens, c.value = phaseKeyEnd, 0, nil
			if a := c.tool.arg(c.text); a != nil && c.gv != nil {
				c.value = a.Value.NewMatcher(c.gv)
			}
			return nil
		}
		c.text += string(c.v.tokens[id])
	case phaseKeyEnd:
		c.phase = phaseValue
	case phaseValue:
		if id == c.v.argValueEnd {
			c.phase, c.value = phaseArgs, nil
			return nil
		}
		c.tokens++
		if c.value != nil {
			return c.value.Accept(id)
		}
	case phaseDone:
		return errToolCallDone
	}
	return nil
}

// Done reports that the call is complete.
func (c *ToolConstraint) Done() bool { return c.phase == phaseDone }

var (
	errToolCallDone   = errors.New("the tool call is complete")
	errToolCallMarkup = errors.New("the tool call names no declared tool")
)
