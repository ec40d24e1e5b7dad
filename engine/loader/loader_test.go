package loader

import (
	"context"
	"errors"
	"testing"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestStreamedWeightsInArena: with streamed experts the resident matrices
// are read into the arena outside the Go heap, and Close frees it.
func TestStreamedWeightsInArena(t *testing.T) {
	d, err := Open(context.Background(), fixtures.Path(t, "glm52-mini"), Options{
		Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			return experts.NewStreamed(ctx, c, cfg, layers, experts.StreamOptions{})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every resident byte but the norm vectors (copied to the heap) is in
	// the arena.
	if res := int(d.Summary.ResidentBytes); d.arenaUsed < res*9/10 || d.arenaUsed > len(d.arena) {
		t.Errorf("arena holds %d of %d resident bytes (arena %d bytes)", d.arenaUsed, res, len(d.arena))
	}
	out, err := d.Model.Forward(context.Background(), []model.Request{{Seq: d.Model.NewSequence(8), Tokens: []int{1, 2, 3}}}, nil)
	if err != nil || len(out[0].Logits[0]) != d.Config.VocabSize {
		t.Fatalf("forward on the arena's weights: %v", err)
	}
	if err := d.Close(); err != nil || d.arena != nil {
		t.Errorf("close: %v, arena %d bytes", err, len(d.arena))
	}
}

// TestFailedExpertSource: an expert source that fails to build, handed
// back as a nil of its concrete type inside the interface (as a plain
// `return experts.NewStreamed(...)` does), fails the load with its error;
// closing the directory does not touch it.
func TestFailedExpertSource(t *testing.T) {
	broken := errors.New("the usage history is damaged")
	_, err := Open(context.Background(), fixtures.Path(t, "glm52-tiny"), Options{
		Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			var s *experts.Streamed
			return s, broken
		},
	})
	if !errors.Is(err, broken) {
		t.Fatalf("Open: %v, want the source's error", err)
	}
}
