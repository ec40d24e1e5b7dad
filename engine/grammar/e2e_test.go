package grammar

import (
	"context"
	"math"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestGenerateWithSchema decodes greedily from the glm52-mini model with the
// person schema's mask. The model never saw JSON, so only validity is
// checked. The bound on tokens is a guarantee, not a hope: at most
// 1+maxIndent bytes of whitespace in each of the ten places it may go, a
// name of at most 20 characters (4 bytes each), and the fixed structure.
func TestGenerateWithSchema(t *testing.T) {
	dir := fixtures.Path(t, "glm52-mini")
	ctx := context.Background()
	d, err := loader.Open(ctx, dir, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tok, v := fixtureVocab(t)
	validate := validator(t, personSchema)
	maxTokens := 10*(1+maxIndent) + 20*4 + len(`{"name":"","ok":false}`) + 1

	prompts := []string{
		"[gMASK]<sop><|user|>\nWhat does json.dumps do?<|assistant|>\n",
		"[gMASK]<sop><|user|>\nGive a person as a JSON object with a name.<|assistant|>\n",
	}
	mask := make([]uint64, v.MaskWords())
	for _, p := range prompts {
		m := compileFor(t, personSchema).NewMatcher(v)
		seq := d.Model.NewSequence(0)
		input := tok.Encode(p)
		var out []byte
		for step := 0; ; step++ {
			if step == maxTokens {
				t.Fatalf("no end after %d tokens: %q", maxTokens, out)
			}
			res, err := d.Model.Forward(ctx, []model.Request{{Seq: seq, Tokens: input}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			logits := res[0].Logits[len(res[0].Logits)-1]
			m.Allowed(mask)
			for id := range logits {
				if id >= v.Size() || !has(mask, id) {
					logits[id] = float32(math.Inf(-1))
				}
			}
			id := generate.Argmax(logits)
			if err := m.Accept(id); err != nil {
				t.Fatalf("after %q: %v", out, err)
			}
			if m.Ended() {
				break
			}
			out = append(out, v.tokens[id]...)
			input = []int{id}
		}
		if err := validate(out); err != nil {
			t.Errorf("%q does not validate: %v", out, err)
		}
		t.Logf("%q", out)
	}
}
