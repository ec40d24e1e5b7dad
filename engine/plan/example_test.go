package plan_test

import (
	"fmt"
	"log"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/internal/fixtures"
)

// Plan a run from a model's headers, before any weight is read, the way
// spool fit does: every line that grows with context, rows or experts, and
// whether their sum fits the memory. A budget that cannot hold the model is
// refused with what to change.
func Example() {
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
	sum, err := container.Validate(c, cfg)
	if err != nil {
		log.Fatal(err)
	}
	w, err := plan.FromContainer(c, cfg, sum)
	if err != nil {
		log.Fatal(err)
	}

	p, err := plan.New(cfg, w, plan.Options{Memory: 4 << 30, Context: 4096, Threads: 4})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("fits %v: %s planned of %s; every expert cached: %v\n",
		p.Fits, plan.SizeText(p.PlannedProcessBytes), plan.SizeText(p.MemoryLimitBytes), p.AllExpertsCached())
	for _, name := range []string{plan.ItemResident, plan.ItemKV, plan.ItemCache} {
		if it, ok := p.Item(name); ok {
			fmt.Printf("%s: %s\n", name, plan.SizeText(it.Bytes))
		}
	}

	small, err := plan.New(cfg, w, plan.Options{Memory: 2560 << 20, Context: 4096, Threads: 4})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("fits %v: %s\n%s\n", small.Fits, small.Problem, small.Suggestion)
	// Output:
	// fits true: 587.51 MiB planned of 2.00 GiB; every expert cached: true
	// resident weights: 4.15 MiB
	// KV cache: 10.25 MiB
	// expert cache (LRU + pinned): 33.00 MiB
	// fits false: not even one expert cache slot per expert layer fits: the fixed items need 541.90 MiB, the limit is 512.00 MiB, one slot in each of the 6 expert layers needs 528.00 KiB more
	// needs at least 3 GiB of memory (--memory 3GiB)
}
