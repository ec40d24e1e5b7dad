package synthetic

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
)

// errRouted stops a forward once its first sparse layer has routed.
var errRouted = errors.New("routed")

// routeOnly is an expert source that refuses every acquisition: the
// forward stops after the router of the first sparse layer has recorded
// its choices in the trace, so no expert is read or applied.
type routeOnly struct{}

func (routeOnly) Acquire(context.Context, int, []int) (experts.Lease, error) { return nil, errRouted }

// TestRoutingSpreadsLikeATrainedModel requires a 512-token prompt of
// seeded random ids to route to at least 90% of a layer's 64 experts, as a
// trained model's prompt does (glm52-mini's 136-token long reference
// touches 54-64 of its 64 experts per layer). The model is written with
// its routed experts as holes and the forward stops at the router, so the
// test reads and multiplies no expert.
func TestRoutingSpreadsLikeATrainedModel(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := modelConfig(&Options{SparseLayers: 1, Experts: 64})
	for i, s := range layout(cfg, int4Row) {
		h := holesNone
		if i > 0 {
			h = holesAll
		}
		if _, _, err := writeShard(ctx, filepath.Join(dir, s.name), s.tensors, nil, 1, h); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := cfg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := loader.Open(ctx, dir, loader.Options{
		Experts: func(context.Context, *container.Container, *config.Config, []int) (experts.Source, error) {
			return routeOnly{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	rng := rand.New(rand.NewPCG(3, 4))
	prompt := make([]int, 512)
	for i := range prompt {
		prompt[i] = rng.IntN(cfg.VocabSize)
	}
	tr := &model.Trace{}
	_, err = d.Model.Forward(ctx, []model.Request{{Seq: d.Model.NewSequence(len(prompt)), Tokens: prompt}}, tr)
	if !errors.Is(err, errRouted) {
		t.Fatalf("forward: %v, want it stopped at the first expert acquisition", err)
	}
	layer := cfg.SparseLayers()[0]
	touched := map[int]int{}
	for _, ids := range tr.Routes[layer] {
		for _, e := range ids {
			touched[e]++
		}
	}
	if len(tr.Routes[layer]) != len(prompt) {
		t.Fatalf("%d routed rows, want %d", len(tr.Routes[layer]), len(prompt))
	}
	most := 0
	for _, n := range touched {
		most = max(most, n)
	}
	t.Logf("layer %d: %d of %d experts routed; the busiest took %d of %d choices", layer, len(touched), cfg.NumRoutedExperts, most, len(prompt)*cfg.ExpertsPerToken)
	if len(touched) < cfg.NumRoutedExperts*9/10 {
		t.Errorf("a 512-token prompt routed to %d of %d experts, want at least 90%%", len(touched), cfg.NumRoutedExperts)
	}
}
