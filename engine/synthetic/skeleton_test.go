package synthetic

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
)

// TestSkeletonWritesRouting checks which payloads the sparse-files
// skeleton writes: exactly the tensors routing depends on (the embedding
// and its scales, every norm, the routers and their correction biases),
// about 1.4 GB of GLM-5.2's 383 GB, and no expert or projection.
func TestSkeletonWritesRouting(t *testing.T) {
	cfg := glm52()
	shards := layout(cfg, int4Row)
	seedBiases(shards)
	routers, biases := 0, 0
	for _, s := range shards {
		for _, tt := range s.tensors {
			name := tt.name
			want := strings.HasPrefix(name, "model.embed_tokens.") || strings.HasSuffix(name, "norm.weight") ||
				strings.HasSuffix(name, ".mlp.gate.weight") || strings.HasSuffix(name, ".e_score_correction_bias")
			if tt.routing != want {
				t.Errorf("%s: written %v, want %v", name, tt.routing, want)
			}
			switch {
			case strings.HasSuffix(name, ".mlp.gate.weight"):
				routers++
			case strings.HasSuffix(name, ".e_score_correction_bias"):
				biases++
				if tt.fill != fillUniform || tt.base != biasStd {
					t.Errorf("%s: fill %d base %g, want seeded values of deviation %g", name, tt.fill, tt.base, biasStd)
				}
			}
		}
	}
	layers := len(cfg.SparseLayers()) + cfg.NumNextNPredictLayers
	if routers != layers || biases != layers {
		t.Errorf("%d routers and %d biases, want one each for %d expert layers", routers, biases, layers)
	}
	n := routingBytes(shards)
	t.Logf("the skeleton writes %d bytes of routing tensors", n)
	if n < 1_300_000_000 || n > 1_600_000_000 {
		t.Errorf("the skeleton writes %d bytes, want about 1.4 GB (embedding 952 MB, 76 routers of 6.3 MB)", n)
	}
}

// scaledSkeleton writes the sparse-files skeleton of a scaled-down
// GLM-5.2 (hidden 512, experts 128 wide; one dense layer, three sparse
// layers of 256 experts, the MTP layer) into a fresh directory.
func scaledSkeleton(t *testing.T, allHoles bool) string {
	t.Helper()
	cfg := modelConfig(&Options{SparseLayers: 3, Experts: 256})
	cfg.HiddenSize, cfg.MoEIntermediateSize, cfg.NumNextNPredictLayers = 512, 128, 1
	dir := filepath.Join(t.TempDir(), "skeleton")
	if err := prepareDir(dir); err != nil {
		t.Fatal(err)
	}
	res, err := writeModel(context.Background(), dir, cfg, Options{SparseFiles: true, Seed: 1, allHoles: allHoles})
	if err != nil {
		t.Fatal(err)
	}
	if allHoles != (res.PayloadBytes == 0) {
		t.Fatalf("all holes %v: %d payload bytes written", allHoles, res.PayloadBytes)
	}
	return dir
}

// TestSkeletonSpreadsLikeATrainedModel is issue 22's check on a scaled-down
// skeleton: a 64-token prefill (distinct seeded ids, one token generated,
// as spool run --prompt-ids ... --max-tokens 1) routes to at least 150
// distinct experts of each 256-expert layer, where the all-holes skeleton
// (zero routers, all tied) routes every token to the same 8.
func TestSkeletonSpreadsLikeATrainedModel(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(22, 64))
	prompt := rng.Perm(2000)[:64]
	prefill := func(dir string) *generate.Result {
		d, err := loader.Open(ctx, dir, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		m := d.Model
		res, err := generate.Generate(ctx, m, m.NewSequence(len(prompt)+1), prompt, generate.Params{MaxTokens: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, tt := range []struct {
		name     string
		allHoles bool
	}{{"seeded", false}, {"all holes", true}} {
		t.Run(tt.name, func(t *testing.T) {
			res := prefill(scaledSkeleton(t, tt.allHoles))
			routed := 0
			for row, n := range res.PrefillExpertsByLayer {
				if n == 0 {
					continue // the MTP layer: no decode follows the prefill
				}
				routed++
				if !tt.allHoles && n < 150 {
					t.Errorf("expert layer %d: %d distinct experts routed, want at least 150 of 256", row, n)
				}
				if tt.allHoles && n != 8 {
					t.Errorf("expert layer %d: %d distinct experts routed on the all-holes skeleton, want the 8 its tied routers pick", row, n)
				}
			}
			if routed != 3 {
				t.Errorf("%d expert layers routed (%v), want the 3 sparse layers", routed, res.PrefillExpertsByLayer)
			}
			t.Logf("%s: experts per layer %v, mean %.1f", tt.name, res.PrefillExpertsByLayer, res.ExpertsTouchedPerLayer())
		})
	}
}
