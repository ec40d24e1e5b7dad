package experts_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/experts"
	"github.com/spoolhq/spool/internal/fixtures"
)

// Stream routed experts from disk through a small cache: the first forward
// of a layer reads its experts, the second finds them in the LRU.
func ExampleNewStreamed() {
	ctx := context.Background()
	dir := fixtures.DemoModel()
	cfg, err := config.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	c, err := container.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	src, err := experts.NewStreamed(ctx, c, cfg, cfg.SparseLayers(), experts.StreamOptions{CacheBytes: 8 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()

	layer := cfg.SparseLayers()[0]
	ids := []int{5, 9, 40}
	for forward := range 2 {
		lease, err := src.Acquire(ctx, layer, ids)
		if err != nil {
			log.Fatal(err)
		}
		var got []int
		for {
			i, e, err := lease.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				log.Fatal(err)
			}
			got = append(got, ids[i])
			_ = e.Gate // the model applies down(silu(gate x) * up x) here
			lease.Done(i)
		}
		lease.Release()
		slices.Sort(got) // experts arrive as their reads land
		t := src.Stats().Total
		fmt.Printf("forward %d: experts %v; %d hits, %d misses so far\n", forward, got, t.Hits, t.Misses)
	}
	// Output:
	// forward 0: experts [5 9 40]; 0 hits, 3 misses so far
	// forward 1: experts [5 9 40]; 3 hits, 3 misses so far
}
