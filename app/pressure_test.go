package main

import (
	"os"
	"runtime"
	"testing"

	"github.com/spoolhq/spool/internal/fixtures"
)

// TestStatsShowMemoryPressure: spool serve subscribes to the system's
// memory pressure at start, and /stats says the level, where it comes
// from and the cache sizes in force.
func TestStatsShowMemoryPressure(t *testing.T) {
	p := startServe(t, []string{"XDG_CACHE_HOME=" + t.TempDir()}, "--model", fixtures.Path(t, "glm52-mini"), "--prompt-cache", t.TempDir())
	st := stats(t, p.url)
	p.stop(t)
	mp, ok := st["memory_pressure"].(map[string]any)
	if !ok {
		t.Fatalf("/stats has no memory_pressure section: %v", st)
	}
	if mp["level"] != "normal" || mp["share"] != 1.0 || usageInt(st, "memory_pressure", "prompt_cache_memory_cap_bytes") <= 0 ||
		usageInt(st, "memory_pressure", "prompt_cache_memory_cap_bytes") != usageInt(st, "memory_pressure", "prompt_cache_memory_planned_bytes") ||
		usageInt(st, "memory_pressure", "expert_lru_slots_per_layer") != usageInt(st, "memory_pressure", "expert_lru_slots_per_layer_planned") {
		t.Fatalf("memory_pressure at start: %v", mp)
	}
	_, psiErr := os.Stat("/proc/pressure/memory")
	switch {
	case runtime.GOOS == "linux" && psiErr == nil:
		if mp["source"] == nil || mp["source"] == "" || mp["off"] != nil {
			t.Fatalf("a kernel with PSI, yet memory_pressure is %v", mp)
		}
	case mp["off"] == nil && mp["source"] == nil:
		t.Fatalf("memory_pressure names neither its source nor why it is off: %v", mp)
	}
}
