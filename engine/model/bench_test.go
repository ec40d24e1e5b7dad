package model_test

import (
	"context"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixtures"
)

// BenchmarkMiniLong is the peer's workload: glm52-mini's 136-token long
// prompt, then 32 greedy tokens.
func BenchmarkMiniLong(b *testing.B) {
	d := openB(b, "glm52-mini")
	refs, _ := fixtures.LoadRefs(b, "glm52-mini")
	prompt := refs.Cases[2].PromptIDs
	for b.Loop() {
		_, err := generate.Generate(context.Background(), d.Model, d.Model.NewSequence(0), prompt, generate.Params{MaxTokens: 32}, nil)
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMiniPrefill is the prefill of glm52-mini's 136-token long prompt.
func BenchmarkMiniPrefill(b *testing.B) {
	d := openB(b, "glm52-mini")
	refs, _ := fixtures.LoadRefs(b, "glm52-mini")
	prompt := refs.Cases[2].PromptIDs
	for b.Loop() {
		seq := d.Model.NewSequence(0)
		if _, err := d.Model.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: prompt}}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMiniDecode is one decode step after the long prompt.
func BenchmarkMiniDecode(b *testing.B) {
	d := openB(b, "glm52-mini")
	refs, _ := fixtures.LoadRefs(b, "glm52-mini")
	prompt := refs.Cases[2].PromptIDs
	seq := d.Model.NewSequence(0)
	if _, err := d.Model.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: prompt}}, nil); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := d.Model.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: []int{42}}}, nil); err != nil {
			b.Fatal(err)
		}
		seq.Trim(len(prompt))
	}
}
