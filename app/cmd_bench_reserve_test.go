package main

import (
	"encoding/json"
	"testing"

	"github.com/spoolhq/spool/engine/bench"
)

// TestBenchReserve runs spool bench reserve on the demo model: the engine
// generates, and the process's peak beyond the plan's lines is measured
// and within the runtime reserve line, so the peak is within the plan.
func TestBenchReserve(t *testing.T) {
	out, err := runSpool(t, "bench", "reserve", "--model", "../assets/models/glm52-demo", "--tokens", "600", "--decode", "4", "--gpu", "off", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r bench.ReserveResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	if r.Tokens != 4 || r.Context != 604 || len(r.Items) == 0 || r.PlannedLinesBytes <= 0 || r.RuntimeReserveBytes <= 0 {
		t.Fatalf("the run or the plan is missing: %s", out)
	}
	if r.PeakRSSBytes <= 0 || r.BeyondLinesBytes != r.PeakRSSBytes-r.PlannedLinesBytes || r.GoTotalBytes <= 0 || r.GoHeapObjectsBytes <= 0 {
		t.Errorf("figures missing or inconsistent: %s", out)
	}
	if r.BeyondLinesBytes > r.RuntimeReserveBytes {
		t.Errorf("the process held %d bytes beyond the lines, more than the runtime reserve %d", r.BeyondLinesBytes, r.RuntimeReserveBytes)
	}
	t.Logf("peak RSS %d, lines %d, beyond %d (%.0f%% of the reserve)", r.PeakRSSBytes, r.PlannedLinesBytes, r.BeyondLinesBytes, 100*r.ReserveUse)
}
