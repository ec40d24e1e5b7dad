package container_test

import (
	"fmt"
	"log"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/internal/fixtures"
)

// Open a model directory, check every header against its config before any
// weight is read, then locate and read one routed expert.
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
	fmt.Printf("%d shards, %d tensors, MTP %v, DSA %v\n", len(sum.Shards), sum.Tensors, sum.MTP, sum.DSA)
	for _, f := range sum.Formats {
		fmt.Printf("%s: %d tensors\n", f.Format, f.Count)
	}

	layer := cfg.SparseLayers()[0]
	loc, err := c.Expert(layer, 0, cfg)
	if err != nil {
		log.Fatal(err)
	}
	gate, up, down, err := c.ReadExpert(loc, make([]byte, loc.BufferSize()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("layer %d expert 0: %d bytes in %d read(s); gate %dx%d, up %dx%d, down %dx%d\n",
		layer, loc.Bytes(), loc.Reads(), gate.Rows, gate.Cols, up.Rows, up.Cols, down.Rows, down.Cols)
	// Output:
	// 4 shards, 2490 tensors, MTP true, DSA true
	// f32: 6 tensors
	// int4-grouped/64: 1002 tensors
	// int4-row: 6 tensors
	// int8-row: 212 tensors
	// vector: 44 tensors
	// layer 1 expert 0: 55296 bytes in 2 read(s); gate 128x256, up 128x256, down 256x128
}
