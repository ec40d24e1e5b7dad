//go:build vulkan && cgo

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/bench"
	"github.com/spoolhq/spool/internal/fixtures"
)

// The GPU through the commands, on lavapipe in CI (--gpu on takes a CPU
// implementation of Vulkan; auto does not).

// runJSON runs the spool command line args and decodes its standard
// output into v; the log (standard error) is returned.
func runJSON(t *testing.T, v any, args ...string) string {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	root := newRootCmd()
	var out, log bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&log)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, log.String())
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		t.Fatalf("%v: output is not one JSON object: %v\n%s", args, err, out.String())
	}
	return log.String()
}

// TestRunOnGPU: spool run --gpu on prefills on the GPU, says so, and
// generates the reference's greedy tokens; auto leaves a CPU Vulkan device
// alone.
func TestRunOnGPU(t *testing.T) {
	refs, _ := fixtures.LoadRefs(t, "glm52-mini")
	dir := fixtures.Path(t, "glm52-mini")
	cs := refs.Cases[0] // 19 tokens: a prefill of at least model.DefaultBackendRows
	var r runResult
	log := runJSON(t, &r, "run", "--model", dir, "--prompt-ids", idsFlag(cs.PromptIDs), "--max-tokens", "8", "--temperature", "0", "--gpu", "on", "--json")
	if !r.GPU.Active || r.GPU.Device == nil || r.GPU.Plan == nil || !strings.Contains(log, "gpu: prefill on") {
		t.Fatalf("the GPU was not used: %+v\n%s", r.GPU, log)
	}
	if !slices.Equal(r.TokenIDs, cs.Greedy[:len(r.TokenIDs)]) {
		t.Errorf("tokens %v, want a prefix of %v", r.TokenIDs, cs.Greedy)
	}
	r = runResult{}
	runJSON(t, &r, "run", "--model", dir, "--prompt-ids", idsFlag(cs.PromptIDs), "--max-tokens", "1", "--json")
	if r.GPU.Active && r.GPU.Device.Type == "cpu" {
		t.Errorf("auto used a CPU implementation of Vulkan: %+v", r.GPU)
	}
}

// TestBenchPrefillGPU: bench prefill --gpu on reports the CPU and the GPU
// prefill of the same prompt (past index_topk, so DSA rows gather their
// keys on the GPU) in one run, with the same first token.
func TestBenchPrefillGPU(t *testing.T) {
	var r bench.PrefillResult
	runJSON(t, &r, "bench", "prefill", "--model", "../assets/models/glm52-demo", "--tokens", "160", "--memory", "4GiB", "--gpu", "on", "--json")
	if r.GPUPrefill == nil || !r.GPU.Active || r.GPUSpeedup <= 0 || r.GPUSameFirstToken == nil || !*r.GPUSameFirstToken {
		t.Fatalf("the GPU leg is missing or disagrees: %+v", r)
	}
	if r.Prefill.TokensPerSecond <= 0 || r.GPUPrefill.TokensPerSecond <= 0 || r.Threads <= 0 {
		t.Errorf("figures missing: %+v", r)
	}
	checkSteps(t, "GPU leg", r.GPUPrefill)
	if g := r.GPUPrefill.GPUTimes; g == nil || g.Ops <= 0 || g.Run <= 0 || g.Ops > r.GPUPrefill.Seconds || g.RunBy["moe"] <= 0 || g.RunBy["attention"] <= 0 {
		t.Errorf("GPU times missing or past the run's %.3f s: %+v", r.GPUPrefill.Seconds, g)
	}
	// lavapipe reads host memory: the experts are used in place, none
	// copied, no copy waited for.
	if g := r.GPUPrefill.GPUTimes; g != nil && (g.ExpertsInPlace == 0 || g.ExpertsCopied != 0 || r.GPUPrefill.CopyWaitSeconds != 0) {
		t.Errorf("experts in place %d, copied %d, copy wait %.3fs", g.ExpertsInPlace, g.ExpertsCopied, r.GPUPrefill.CopyWaitSeconds)
	}
	if r.GPUPrefill.ExpertsTouchedPerLayer != r.Prefill.ExpertsTouchedPerLayer {
		t.Errorf("experts per layer: GPU leg %.2f, CPU leg %.2f", r.GPUPrefill.ExpertsTouchedPerLayer, r.Prefill.ExpertsTouchedPerLayer)
	}
	// --copy-experts: the same leg copying the experts through the bank's
	// groups, with the copy wait left over.
	var cp bench.PrefillResult
	runJSON(t, &cp, "bench", "prefill", "--model", "../assets/models/glm52-demo", "--tokens", "160", "--memory", "4GiB", "--gpu", "on", "--copy-experts", "--json")
	if g := cp.GPUPrefill.GPUTimes; g == nil || g.ExpertsCopied == 0 || g.ExpertsInPlace != 0 || !(cp.GPUPrefill.CopyWaitSeconds >= 0 && cp.GPUPrefill.CopyWaitSeconds <= g.Experts) {
		t.Errorf("--copy-experts: %+v", g)
	}
	if !*cp.GPUSameFirstToken || cp.GPUPrefill.FirstToken != r.GPUPrefill.FirstToken {
		t.Errorf("--copy-experts: first token %d (CPU %d), in place %d", cp.GPUPrefill.FirstToken, cp.Prefill.FirstToken, r.GPUPrefill.FirstToken)
	}

	// --gpu-only: the GPU leg alone, profiled.
	prof := filepath.Join(t.TempDir(), "gpu.prof")
	var only bench.PrefillResult
	runJSON(t, &only, "bench", "prefill", "--model", "../assets/models/glm52-demo", "--tokens", "24", "--memory", "4GiB", "--gpu", "on", "--gpu-only", "--cpuprofile", prof, "--json")
	if only.GPUPrefill == nil || only.GPUPrefill.Seconds <= 0 || only.Prefill.Seconds != 0 || only.GPUSpeedup != 0 {
		t.Errorf("--gpu-only: CPU %+v, GPU %+v, speedup %v", only.Prefill, only.GPUPrefill, only.GPUSpeedup)
	}
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Errorf("--cpuprofile wrote no profile: %v", err)
	}
	var off bench.PrefillResult
	runJSON(t, &off, "bench", "prefill", "--model", "../assets/models/glm52-demo", "--tokens", "16", "--memory", "4GiB", "--gpu", "off", "--warm", "--stream", "--json")
	if off.GPUPrefill != nil || off.GPU.Reason != "--gpu off" {
		t.Errorf("--gpu off: %+v", off.GPU)
	}
	// Warmed up, the timed run finds the prompt's experts cached.
	if !off.Warm || !off.Streamed || off.Prefill.ExpertsRead != 0 {
		t.Errorf("--warm: warm %v, streamed %v, %d experts read", off.Warm, off.Streamed, off.Prefill.ExpertsRead)
	}
}
