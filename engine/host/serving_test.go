package host

import (
	"testing"

	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/plan"
	"github.com/spoolhq/spool/engine/server"
	"github.com/spoolhq/spool/internal/fixtures"
)

// TestFootprintOf: Ollama's listings get the weight files' bytes, the
// planned process memory, and the GPU's lines, added to the process's
// only where the GPU has memory of its own.
func TestFootprintOf(t *testing.T) {
	c, err := container.Open(fixtures.DemoModel())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var disk int64
	for _, sh := range c.Shards() {
		disk += sh.Size
	}
	if disk == 0 {
		t.Fatal("the demo model's shards have no bytes")
	}
	for _, tc := range []struct {
		name string
		gpu  *plan.GPUPlan
		want server.ModelFootprint
	}{
		{"CPU only", nil, server.ModelFootprint{DiskBytes: disk, MemoryBytes: 1000}},
		{"unified memory", &plan.GPUPlan{DeviceBytes: 300, Unified: true}, server.ModelFootprint{DiskBytes: disk, MemoryBytes: 1000, GPUBytes: 300}},
		{"discrete device", &plan.GPUPlan{DeviceBytes: 300}, server.ModelFootprint{DiskBytes: disk, MemoryBytes: 1300, GPUBytes: 300}},
	} {
		p := &plan.Plan{PlannedProcessBytes: 1000, GPU: tc.gpu}
		if got := footprintOf(c, p); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
