package model_test

import (
	"context"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
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
