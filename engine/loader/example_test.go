package loader_test

import (
	"context"
	"fmt"
	"log"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/internal/fixtures"
)

// Open a model in two steps, as spool run and serve do: validate the
// headers and plan memory before any weight is read, then load the resident
// weights with the routed experts streamed from disk, and run a forward.
func Example() {
	ctx := context.Background()
	d, err := loader.OpenHeaders(fixtures.DemoModel())
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	w, err := plan.FromContainer(d.Container, d.Config, d.Summary)
	if err != nil {
		log.Fatal(err)
	}
	p, err := plan.New(d.Config, w, plan.Options{Memory: 4 << 30, Context: 256, Threads: 4})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d layers, %s resident; fits in 4 GiB: %v\n", d.Config.NumLayers, plan.SizeText(d.Summary.ResidentBytes), p.Fits)

	err = d.Load(ctx, loader.Options{
		Experts: func(ctx context.Context, c *container.Container, cfg *config.Config, layers []int) (experts.Source, error) {
			return experts.NewStreamed(ctx, c, cfg, layers, experts.StreamOptions{CacheBytes: p.ExpertCacheBytes})
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	seq := d.Model.NewSequence(p.Context)
	out, err := d.Model.Forward(ctx, []model.Request{{Seq: seq, Tokens: []int{8171, 8173, 39}}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	logits := out[0].Logits[0]
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	fmt.Printf("%d logits; the greedy next token is %d\n", len(logits), best)
	// Output:
	// 6 layers, 6.18 MiB resident; fits in 4 GiB: true
	// 8192 logits; the greedy next token is 72
}
