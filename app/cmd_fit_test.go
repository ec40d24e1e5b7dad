package main

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	sharedfixtures "github.com/spoolhq/spool/internal/fixtures"
)

// fitFixturesDir returns ../shared/fixtures relative to the module root,
// skipping the test when it is absent.
func fitFixturesDir(t *testing.T) string {
	t.Helper()
	return sharedfixtures.Root(t)
}

type fitJSON struct {
	ResidentWeightBytes int64 `json:"resident_weight_bytes"`
	ExpertSlotBytes     int64 `json:"expert_slot_bytes"`
	KVBytes             int64 `json:"kv_bytes"`
	PlannedProcessBytes int64 `json:"planned_process_bytes"`
	MemoryLimitBytes    int64 `json:"memory_limit_bytes"`
	Fits                bool  `json:"fits"`
	CacheSlotsPerLayer  int   `json:"cache_slots_per_layer"`
	Items               []struct {
		Name  string `json:"name"`
		Bytes int64  `json:"bytes"`
	} `json:"items"`
}

func decodeFit(t *testing.T, out string) fitJSON {
	t.Helper()
	var f fitJSON
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	return f
}

func TestFitRealConfig(t *testing.T) {
	cfgPath := filepath.Join(fitFixturesDir(t), "glm52-real", "config.json")
	out, err := runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--json")
	if err != nil {
		t.Fatalf("32GiB: %v\n%s", err, out)
	}
	f := decodeFit(t, out)
	if !f.Fits || f.ResidentWeightBytes != 10_877_286_144 || f.MemoryLimitBytes != 28<<30 {
		t.Errorf("32GiB: %+v", f)
	}
	if f.KVBytes != 4096*182_016 || f.ExpertSlotBytes != 18_939_904 || f.PlannedProcessBytes > f.MemoryLimitBytes || f.CacheSlotsPerLayer < 1 {
		t.Errorf("32GiB: %+v", f)
	}

	out, err = runSpool(t, "fit", "--config", cfgPath, "--memory", "14GiB")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != exitNoFit {
		t.Fatalf("14GiB: err = %v, want exit status %d\n%s", err, exitNoFit, out)
	}
	for _, s := range []string{"resident weights", "working bank", "KV cache", "activations", "logits", "attention workspace", "runtime reserve", "expert cache", "fits: no", "needs at least"} {
		if !strings.Contains(out, s) {
			t.Errorf("14GiB output lacks %q:\n%s", s, out)
		}
	}

	out, err = runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--group-size", "64", "--json")
	if err != nil {
		t.Fatalf("group 64: %v\n%s", err, out)
	}
	if g := decodeFit(t, out); g.ExpertSlotBytes <= f.ExpertSlotBytes || g.ResidentWeightBytes <= f.ResidentWeightBytes {
		t.Errorf("group 64 %+v is not larger than per-row %+v", g, f)
	}
}

func TestFitFixtureModels(t *testing.T) {
	fx := fitFixturesDir(t)
	for _, name := range []string{"glm52-tiny", "glm52-mini"} {
		out, err := runSpool(t, "fit", "--model", filepath.Join(fx, name), "--memory", "8GiB", "--context", "512", "--json")
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		if f := decodeFit(t, out); !f.Fits || f.ResidentWeightBytes == 0 || f.KVBytes == 0 {
			t.Errorf("%s: %+v", name, f)
		}
	}
}

func TestFitFlagErrors(t *testing.T) {
	fx := fitFixturesDir(t)
	tiny := filepath.Join(fx, "glm52-tiny")
	for _, args := range [][]string{
		{"fit"},
		{"fit", "--model", tiny, "--config", tiny},
		{"fit", "--model", tiny, "--group-size", "64"},
		{"fit", "--config", tiny, "--group-size", "32"},
		{"fit", "--config", tiny, "--memory", "lots"},
		{"fit", "--config", tiny, "--memory", "8GiB", "--context", "0"},
		{"fit", "--config", tiny, "--memory", "8GiB", "--expert-cache", "-1"},
		{"fit", "--model", filepath.Join(fx, "no-such-model")},
	} {
		out, err := runSpool(t, args...)
		var ee exitError
		if err == nil || errors.As(err, &ee) {
			t.Errorf("%v: err = %v, want a usage error\n%s", args, err, out)
		}
	}
}

func TestGenBenchSkeletonFits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "skeleton")
	out, err := runSpool(t, "gen-bench", "--out", dir, "--sparse-files")
	if err != nil {
		t.Fatalf("gen-bench: %v\n%s", err, out)
	}
	out, err = runSpool(t, "fit", "--model", dir, "--memory", "32GiB", "--json")
	if err != nil {
		t.Fatalf("fit: %v\n%s", err, out)
	}
	if f := decodeFit(t, out); !f.Fits || f.ResidentWeightBytes != 10_877_286_144 || f.ExpertSlotBytes != 18_939_904 {
		t.Errorf("skeleton: %+v", f)
	}
	if _, err := runSpool(t, "gen-bench", "--out", filepath.Join(t.TempDir(), "x"), "--sparse-files", "--experts", "16"); err == nil {
		t.Error("--sparse-files with --experts accepted")
	}
}
