package model_test

import (
	"context"
	"slices"
	"testing"
	"unsafe"

	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/kernels"
)

// TestEmbeddingOnDemand: with the embedding table read by row on demand
// into a cache of a few rows (evicting all the time), the logits of every
// reference case and the MTP layer's are bit-identical to those of the
// resident table; each row is read when it is not cached; and the cache
// takes what the plan's embedding line counts.
func TestEmbeddingOnDemand(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			resident := open(t, name).Model
			d, err := loader.Open(context.Background(), fixtures.ModelDir(t, name), loader.Options{Model: model.Options{EmbeddingRows: 3}})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			m := d.Model
			refs, _ := fixtures.LoadRefs(t, name)
			forward := func(m *model.Model, prompt []int) ([]float32, []float32) {
				seq := m.NewSequence(0)
				out, err := m.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: prompt, AllLogits: true}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				logits := slices.Concat(out[0].Logits...)
				mtp, _, err := m.MTPForward(context.Background(), model.MTPRequest{Seq: seq, Hidden: out[0].Hidden[:len(prompt)-1], Next: prompt[1:]})
				if err != nil {
					t.Fatal(err)
				}
				return logits, slices.Concat(mtp...)
			}
			distinct := 0
			for _, cs := range refs.Cases {
				want, wantMTP := forward(resident, cs.PromptIDs)
				got, gotMTP := forward(m, cs.PromptIDs)
				if !slices.Equal(got, want) || !slices.Equal(gotMTP, wantMTP) {
					t.Errorf("case %s: the logits differ from the resident table's", cs.Label)
				}
				seen := map[int]bool{}
				for _, id := range cs.PromptIDs {
					seen[id] = true
				}
				distinct += len(seen)
			}
			if got := m.EmbeddingReads(); got < int64(distinct) {
				t.Errorf("%d rows read for prompts of %d distinct tokens through 3 cached rows", got, distinct)
			}
			if resident.EmbeddingReads() != 0 {
				t.Errorf("the resident table read %d rows", resident.EmbeddingReads())
			}
			w, err := plan.FromContainer(d.Container, d.Config, d.Summary)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := m.EmbeddingBytes(), plan.EmbeddingCacheBytes(d.Config, w, 3); got != want {
				t.Errorf("the cache holds %d bytes, the plan counts %d", got, want)
			}
			if got := resident.EmbeddingBytes(); got != w.EmbeddingBytes {
				t.Errorf("the resident table holds %d bytes, its tensors %d", got, w.EmbeddingBytes)
			}
		})
	}
}

// TestEmbeddingSlotOverhead: the plan's per-row bookkeeping of the
// embedding cache bounds what the model keeps beside each row.
func TestEmbeddingSlotOverhead(t *testing.T) {
	if n := int(unsafe.Sizeof(kernels.Matrix{})) + 4 + 1; n > plan.EmbeddingSlotOverhead {
		t.Errorf("a cached row takes %d bytes of bookkeeping, the plan counts %d", n, plan.EmbeddingSlotOverhead)
	}
}
