package local

import (
	"encoding/json"
	"fmt"

	"github.com/spoolhq/spool/engine/grammar"
	"github.com/spoolhq/spool/engine/scheduler"
	"github.com/spoolhq/spool/engine/tokenizer"
)

// ConstraintCompiler builds the constraint that enforces a JSON format:
// schema is a JSON Schema, or nil for any JSON object.
type ConstraintCompiler func(schema json.RawMessage) (scheduler.Constraint, error)

// GrammarConstraints returns the ConstraintCompiler backed by
// engine/grammar for a tokenizer; eos are the model's end-of-sequence ids.
// The vocabulary index is built once here; forced tool calls decode their
// arguments on the same vocabulary (see grammarVocab).
func GrammarConstraints(tok *tokenizer.Tokenizer, eos []int) (ConstraintCompiler, error) {
	v, err := grammar.TokenizerVocab(tok, eos)
	if err != nil {
		return nil, fmt.Errorf("local: preparing constrained decoding: %w", err)
	}
	return func(schema json.RawMessage) (scheduler.Constraint, error) {
		g := grammar.JSONObject()
		if schema != nil {
			if g, err = grammar.CompileJSONSchema(schema); err != nil {
				return nil, err
			}
		}
		return grammarConstraint{g.NewMatcher(v)}, nil
	}, nil
}

// grammarConstraint adapts a grammar.Matcher to scheduler.Constraint.
type grammarConstraint struct{ *grammar.Matcher }

func (c grammarConstraint) Mask(allowed []uint64) { c.Allowed(allowed) }

// grammarVocab returns the vocabulary of a compiler made by
// GrammarConstraints, or nil for any other compiler (or none).
func grammarVocab(compile ConstraintCompiler) *grammar.Vocab {
	if compile == nil {
		return nil
	}
	c, err := compile(nil)
	if err != nil {
		return nil
	}
	if gc, ok := c.(grammarConstraint); ok {
		return gc.Vocab()
	}
	return nil
}
