package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/speed"
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
	if !f.Fits || f.ResidentWeightBytes != 9_925_083_904 || f.MemoryLimitBytes != 28<<30 {
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
	for _, s := range []string{"resident weights", "working bank", "KV cache", "prefill segment", "prefill scratch", "logits", "attention workspace", "runtime reserve", "expert cache", "fits: no", "needs at least"} {
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

// TestFitSlotCounts: GLM-5.2 with a 32k context (an agent's) keeps at
// least 6 expert cache slots per layer on 32 GiB and 3 on 24 GiB, with
// the prompt cache spool fit plans by default, on a 10-core Mac; on 32
// GiB the whole context is one prefill segment.
func TestFitSlotCounts(t *testing.T) {
	cfgPath := filepath.Join(fitFixturesDir(t), "glm52-real", "config.json")
	for _, tc := range []struct {
		memory       string
		slots        int
		wholeContext bool
	}{{"32GiB", 6, true}, {"24GiB", 3, false}} {
		out, err := runSpool(t, "fit", "--config", cfgPath, "--memory", tc.memory, "--context", "32768", "--threads", "10", "--json")
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.memory, err, out)
		}
		var f struct {
			Fits               bool  `json:"fits"`
			CacheSlotsPerLayer int   `json:"cache_slots_per_layer"`
			PrefillSegment     int   `json:"prefill_segment"`
			PromptCacheBytes   int64 `json:"prompt_cache_bytes"`
		}
		if err := json.Unmarshal([]byte(out), &f); err != nil {
			t.Fatal(err)
		}
		if !f.Fits || f.CacheSlotsPerLayer < tc.slots || f.PromptCacheBytes == 0 || (tc.wholeContext && f.PrefillSegment != 32768) {
			t.Errorf("%s, 32k context: %+v, want at least %d slots", tc.memory, f, tc.slots)
		}
		t.Logf("%s: %d slots, a %d-token segment", tc.memory, f.CacheSlotsPerLayer, f.PrefillSegment)
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
		{"fit", "--config", tiny, "--mtp-acceptance", "1.5"},
		{"fit", "--config", tiny, "--mtp-union", "2.5"},
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
	if f := decodeFit(t, out); !f.Fits || f.ResidentWeightBytes != 9_925_083_904 || f.ExpertSlotBytes != 18_939_904 {
		t.Errorf("skeleton: %+v", f)
	}
	if _, err := runSpool(t, "gen-bench", "--out", filepath.Join(t.TempDir(), "x"), "--sparse-files", "--experts", "16"); err == nil {
		t.Error("--sparse-files with --experts accepted")
	}
}

type fitSpeedJSON struct {
	Speed struct {
		Machine     string   `json:"machine"`
		Decode      float64  `json:"decode_tokens_per_second"`
		Prefill     float64  `json:"prefill_tokens_per_second"`
		HitRate     float64  `json:"expected_hit_rate"`
		Assumptions []string `json:"assumptions"`
		Unavailable string   `json:"unavailable"`
		AgentPrompt struct {
			Tokens   int     `json:"tokens"`
			Segments int     `json:"segments"`
			Read     float64 `json:"read_seconds"`
			Compute  float64 `json:"compute_seconds"`
			Seconds  float64 `json:"seconds"`
			Device   string  `json:"device"`
		} `json:"agent_prompt"`
		Drafting *struct {
			Decode     float64 `json:"decode_tokens_per_second"`
			Acceptance float64 `json:"acceptance"`
			Union      float64 `json:"expert_union"`
			Choice     string  `json:"choice"`
		} `json:"drafting"`
	} `json:"speed"`
	Fits           bool `json:"fits"`
	PrefillSegment int  `json:"prefill_segment"`
}

// TestFitSpeed checks fit's speed section: from the probe file bench probe
// caches (the default path under the user cache directory, or --probes),
// from an Apple chip's published figures, and what it says without probes.
func TestFitSpeed(t *testing.T) {
	cfgPath := filepath.Join(fitFixturesDir(t), "glm52-real", "config.json")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	decode := func(out string) fitSpeedJSON {
		t.Helper()
		var f fitSpeedJSON
		if err := json.Unmarshal([]byte(out), &f); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return f
	}

	out, err := runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if f := decode(out); !f.Fits || f.Speed.Decode != 0 || !strings.Contains(f.Speed.Unavailable, "spool bench probe") {
		t.Errorf("without probes: %+v, want the section to say how to probe", f)
	}

	probes := speed.Probes{
		Version: speed.ProbesVersion, MeasuredAt: time.Now().UTC(), Machine: "test", Threads: 2,
		DiskBytesPerSecond: 2e9, DiskQueueDepth: 8, DiskPath: "/models", DiskBurstBytesPerSecond: 1.8e9, DiskBurstExperts: 8,
		KernelBytesPerSecond: 20e9, MatMul8BytesPerSecond: 10e9, MemoryReadBytesPerSecond: 40e9,
	}
	if err := speed.Save(speedProbesPath(), probes); err != nil {
		t.Fatal(err)
	}
	out, err = runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	cached := decode(out)
	if !(cached.Speed.Decode > 0) || !(cached.Speed.Prefill > 0) || cached.Speed.Unavailable != "" || len(cached.Speed.Assumptions) < 4 ||
		!strings.Contains(cached.Speed.Machine, "this machine") {
		t.Fatalf("with cached probes: %+v", cached.Speed)
	}

	// Twice the disk rate on a disk-bound decode: faster, not twice (the
	// products do not speed up).
	probes.DiskBytesPerSecond *= 2
	probes.DiskBurstBytesPerSecond *= 2
	other := filepath.Join(t.TempDir(), "p.json")
	if err := speed.Save(other, probes); err != nil {
		t.Fatal(err)
	}
	out, err = runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--json", "--probes", other)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if f := decode(out); !(f.Speed.Decode > cached.Speed.Decode) || !(f.Speed.Decode < 2*cached.Speed.Decode) {
		t.Errorf("double disk rate: %g tok/s against %g", f.Speed.Decode, cached.Speed.Decode)
	}

	// More memory, more cache slots, a higher expected hit rate.
	out, err = runSpool(t, "fit", "--config", cfgPath, "--memory", "64GiB", "--json", "--chip", "m4 pro")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	big := decode(out)
	out, err = runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--json", "--chip", "M4 Pro")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	small := decode(out)
	if !strings.Contains(small.Speed.Machine, "Apple M4 Pro") || !(big.Speed.HitRate > small.Speed.HitRate) || !(big.Speed.Decode > small.Speed.Decode) {
		t.Errorf("M4 Pro 64GiB %+v against 32GiB %+v", big.Speed, small.Speed)
	}

	out, err = runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--context", "32768", "--chip", "M4 Pro")
	if err != nil || !strings.Contains(out, "speed: decode") || !strings.Contains(out, "published figures") || !strings.Contains(out, "speed with MTP drafts") || !strings.Contains(out, "agent prompt: 20000 tokens in 1 segment(s)") {
		t.Errorf("text output: %v\n%s", err, out)
	}

	// A 20,000-token agent prompt on the M4 Pro: one segment at 32 GiB
	// with a 32k context (its experts read once), prefill on the GPU; at
	// 24 GiB shorter segments, each reading the experts again; a 4k
	// context cannot hold it.
	out, err = runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--context", "32768", "--chip", "M4 Pro", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	agent := decode(out)
	a := agent.Speed.AgentPrompt
	if a.Tokens != 20000 || a.Segments != 1 || a.Device != "GPU" || !(a.Read > 0) || !(a.Compute > 0) || a.Seconds != max(a.Read, a.Compute) {
		t.Errorf("agent prompt, 32k context: %+v (segment %d)", a, agent.PrefillSegment)
	}
	short := decode(must(runSpool(t, "fit", "--config", cfgPath, "--memory", "24GiB", "--context", "32768", "--chip", "M4 Pro", "--json")))
	if b := short.Speed.AgentPrompt; b.Segments != (20000+short.PrefillSegment-1)/short.PrefillSegment || b.Segments < 2 || !(b.Read > 1.5*a.Read) || !(b.Seconds >= a.Seconds) {
		t.Errorf("agent prompt at 24 GiB (segment %d): %+v against %+v", short.PrefillSegment, b, a)
	}
	if f := decode(must(runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--chip", "M4 Pro", "--json"))); f.Speed.AgentPrompt.Tokens != 0 || !strings.Contains(strings.Join(f.Speed.Assumptions, " "), "does not fit the 4096-token context") {
		t.Errorf("agent prompt, 4k context: %+v", f.Speed)
	}

	// Drafted decode: at the default assumptions (80% accepted, routing
	// spread evenly) the union of two positions' experts costs GLM-5.2
	// more than the accepted drafts save on a disk-bound Mac, and the
	// gate would not draft; were every draft accepted and the positions'
	// experts shared, it would. Without an MTP layer nothing is drafted.
	if d := small.Speed.Drafting; d == nil || d.Acceptance != 0.8 || math.Abs(d.Union-(2-8.0/256)) > 1e-9 || d.Choice != "plain" || !(d.Decode < small.Speed.Decode) {
		t.Errorf("default drafting %+v (plain %g tok/s)", d, small.Speed.Decode)
	}
	out, err = runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--json", "--chip", "M4 Pro", "--mtp-acceptance", "1", "--mtp-union", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if f := decode(out); f.Speed.Drafting == nil || f.Speed.Drafting.Choice != "draft" || !(f.Speed.Drafting.Decode > f.Speed.Decode) {
		t.Errorf("every draft accepted, experts shared: %+v", f.Speed)
	}
	out, err = runSpool(t, "fit", "--config", cfgPath, "--memory", "32GiB", "--json", "--chip", "M4 Pro", "--no-mtp")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if f := decode(out); f.Speed.Drafting != nil {
		t.Errorf("no MTP layer: drafting %+v", f.Speed.Drafting)
	}
	if out, err := runSpool(t, "fit", "--config", cfgPath, "--chip", "Z80"); err == nil || !strings.Contains(err.Error(), "Z80") {
		t.Errorf("unknown chip: %v\n%s", err, out)
	}
}

// must returns out, failing on err.
func must(out string, err error) string {
	if err != nil {
		panic(fmt.Sprintf("%v\n%s", err, out))
	}
	return out
}
