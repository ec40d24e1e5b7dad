package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/bench"
)

// TestBenchPrefill runs spool bench prefill on the demo model: past
// index_topk with the all-keys comparison (both legs sample the same first
// token), with streamed experts and two cache slots per layer (the expert
// I/O figures are filled in and consistent), and a 16k-token prompt in one
// segment against chunks of 2,048.
func TestBenchPrefill(t *testing.T) {
	const model = "../assets/models/glm52-demo"
	out, err := runSpool(t, "bench", "prefill", "--model", model, "--tokens", "200", "--memory", "4GiB", "--compare-all-keys", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r bench.PrefillResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	if !r.DSA || r.AllKeys == nil || r.SameFirstToken == nil || !*r.SameFirstToken {
		t.Errorf("the all-keys comparison is missing or disagrees: %s", out)
	}
	if !(r.Prefill.TokensPerSecond > 0 && r.DSASpeedup > 0 && r.PeakRSSBytes > 0 && r.PeakOverPlan > 0 && r.AttentionWorkspaceBytes > 0) {
		t.Errorf("figures missing: %s", out)
	}
	checkSteps(t, "CPU leg", &r.Prefill)
	// The trained demo model spreads 200 tokens over most of each layer's
	// experts.
	if e := r.Prefill.ExpertsTouchedPerLayer; e < float64(r.ExpertsPerLayer)/2 || e > float64(r.ExpertsPerLayer) {
		t.Errorf("%.1f experts routed per expert layer of %d", e, r.ExpertsPerLayer)
	}
	if r.Prefill.GPUTimes != nil {
		t.Errorf("the CPU leg reports GPU times: %+v", r.Prefill.GPUTimes)
	}
	if r.PeakRSSBytes > r.PlannedProcessBytes {
		t.Errorf("peak RSS %d exceeds the plan's %d", r.PeakRSSBytes, r.PlannedProcessBytes)
	}

	out, err = runSpool(t, "bench", "prefill", "--model", model, "--tokens", "64", "--memory", "4GiB", "--stream", "--cache-slots", "2", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r = bench.PrefillResult{}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	l := r.Prefill
	if !r.Streamed || r.CacheSlotsPerLayer != 2 || l.ExpertBytesRead <= 0 || l.ExpertsTouched <= 0 {
		t.Fatalf("streamed figures missing: %s", out)
	}
	// One 64-row chunk reads every routed expert exactly once (and direct
	// reads' alignment adds bytes to the demo model's small experts).
	if l.ExpertsRead != int64(l.ExpertsTouched) || l.ReadOverTouched < 1 {
		t.Errorf("%d reads, %d bytes for %d routed experts of %d bytes (%.3fx)", l.ExpertsRead, l.ExpertBytesRead, l.ExpertsTouched, l.TouchedExpertBytes, l.ReadOverTouched)
	}

	// A 16k-token prompt (an agent's) in one layer-major segment reads
	// each routed expert it reaches once (1.0x, with the direct reads'
	// alignment of the demo's small experts), where chunks of 2,048 read
	// them again each; both sample the same first token, and the peak
	// stays within the plan.
	out, err = runSpool(t, "bench", "prefill", "--model", model, "--tokens", "16384", "--context", "16400", "--stream", "--cache-slots", "2", "--compare-chunk", "2048", "--gpu", "off", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r = bench.PrefillResult{}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	seg, ch := r.Prefill, r.Chunked
	if r.SegmentRows < 16384 || ch == nil || r.ChunkRows != 2048 || r.ChunkedSameFirstToken == nil || !*r.ChunkedSameFirstToken || !(r.SegmentSpeedup > 0) {
		t.Fatalf("segment %d rows, chunked leg %+v: %s", r.SegmentRows, ch, out)
	}
	if seg.ReadOverTouched < 1 || seg.ReadOverTouched > 1.25 || ch.ReadOverTouched < 6*seg.ReadOverTouched {
		t.Errorf("the segment read %.3fx the routed experts, the chunks %.3fx", seg.ReadOverTouched, ch.ReadOverTouched)
	}
	if r.PeakRSSBytes > r.PlannedProcessBytes {
		t.Errorf("peak RSS %d exceeds the plan's %d", r.PeakRSSBytes, r.PlannedProcessBytes)
	}

	if out, err := runSpool(t, "bench", "prefill", "--model", model, "--tokens", "8", "--context", "8"); err == nil || !strings.Contains(err.Error(), "--context 8 must exceed --tokens 8") {
		t.Errorf("a context no longer than the prompt: %v\n%s", err, out)
	}
	if out, err := runSpool(t, "bench", "prefill", "--model", model, "--tokens", "8", "--gpu", "off", "--gpu-only"); err == nil || !strings.Contains(err.Error(), "--gpu-only needs --gpu auto or on") {
		t.Errorf("--gpu-only with --gpu off: %v\n%s", err, out)
	}
}

// checkSteps checks that a leg says where its time went: every step of
// the layer forward is named, the layers' steps took time, and the steps
// add up to no more than the run.
func checkSteps(t *testing.T, name string, l *bench.PrefillLeg) {
	t.Helper()
	var sum float64
	for _, s := range []string{"embed", "norm", "project", "attn_host", "indexer", "attend", "prefetch", "mlp", "head"} {
		v, ok := l.StepSeconds[s]
		if !ok || v < 0 {
			t.Errorf("%s: step %q missing or negative: %v", name, s, l.StepSeconds)
		}
		sum += v
	}
	if l.StepSeconds["mlp"] <= 0 || l.StepSeconds["attend"] <= 0 || l.StepSeconds["project"] <= 0 || sum > l.Seconds {
		t.Errorf("%s: steps %v (%.3f s) for a run of %.3f s", name, l.StepSeconds, sum, l.Seconds)
	}
}
