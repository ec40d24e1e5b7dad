package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/speed"
)

// TestUIPlanSpeed checks the Fit page's speed section for GLM-5.2 before
// the download: an Apple chip's prediction, this machine's from cached
// probes, the reason when there are none, and the chips to pick from.
func TestUIPlanSpeed(t *testing.T) {
	t.Setenv("HF_HUB_OFFLINE", "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	dm := newDownloadManager(nil)
	defer dm.Close()
	u := newUIAPI(demoModel(t), newSettingsStore(filepath.Join(t.TempDir(), "settings.json")), dm)
	section := func(q string) map[string]any {
		t.Helper()
		code, r := uiRequest(t, u, "GET", "/ui/plan?model=glm52&memory=32GiB"+q, "")
		sp, _ := r["speed"].(map[string]any)
		if code != 200 || sp == nil {
			t.Fatalf("plan%s: %d %v", q, code, r)
		}
		if chips, _ := r["chips"].([]any); len(chips) < 10 {
			t.Errorf("plan%s lists %d chips", q, len(chips))
		}
		return sp
	}

	if sp := section(""); !strings.Contains(sp["unavailable"].(string), "spool bench probe") {
		t.Errorf("without probes: %v", sp)
	}
	sp := section("&chip=M4+Max")
	if d, _ := sp["decode_tokens_per_second"].(float64); !(d > 0) || !strings.Contains(sp["machine"].(string), "M4 Max") {
		t.Errorf("M4 Max: %v", sp)
	}
	if as, _ := sp["assumptions"].([]any); len(as) < 5 {
		t.Errorf("M4 Max assumptions: %v", sp["assumptions"])
	}
	if sp := section("&chip=Z80"); !strings.Contains(sp["unavailable"].(string), "Z80") {
		t.Errorf("unknown chip: %v", sp)
	}

	err := speed.Save(speedProbesPath(), speed.Probes{
		Version: speed.ProbesVersion, MeasuredAt: time.Now().UTC(), Machine: "test", Threads: 2,
		DiskBytesPerSecond: 1e9, DiskBurstBytesPerSecond: 0.9e9, KernelBytesPerSecond: 3e9, MatMul8BytesPerSecond: 1e9,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sp := section(""); sp["unavailable"] != nil || !(sp["prefill_tokens_per_second"].(float64) > 0) {
		t.Errorf("with probes: %v", sp)
	}
}

// TestUIPlanSpeedUnfit: a plan that does not fit predicts no speed.
func TestUIPlanSpeedUnfit(t *testing.T) {
	t.Setenv("HF_HUB_OFFLINE", "1")
	dm := newDownloadManager(nil)
	defer dm.Close()
	u := newUIAPI(demoModel(t), newSettingsStore(filepath.Join(t.TempDir(), "settings.json")), dm)
	code, r := uiRequest(t, u, "GET", "/ui/plan?model=glm52&memory=16GiB&chip=M4+Max", "")
	sp, _ := r["speed"].(map[string]any)
	if code != 200 || sp == nil || sp["decode_tokens_per_second"] != nil || !strings.Contains(sp["unavailable"].(string), "does not fit") {
		t.Fatalf("unfit plan: %d %v", code, sp)
	}
}
