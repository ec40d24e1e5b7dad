//go:build vulkan && cgo

package model_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/kernels/gpu"
)

// openOnGPU loads a fixture model of its own (the shared one stays on the
// CPU) with every forward of at least minRows rows on the Vulkan device
// (lavapipe in CI).
func openOnGPU(t *testing.T, name string, minRows int) *model.Model {
	t.Helper()
	return openOnGPUCounted(t, name, minRows, &backendCalls{})
}

// openOnGPUCounted is openOnGPU counting the backend's calls into calls.
func openOnGPUCounted(t *testing.T, name string, minRows int, calls *backendCalls) *model.Model {
	t.Helper()
	m, _ := openOnDevice(t, name, minRows, calls, gpu.Options{Device: -1})
	return m
}

// openOnDevice is openOnGPUCounted on a device opened with opts; it
// returns the device too.
func openOnDevice(t *testing.T, name string, minRows int, calls *backendCalls, opts gpu.Options) (*model.Model, *gpu.Device) {
	t.Helper()
	return openOnDeviceWith(t, name, minRows, calls, opts, model.Options{})
}

// openOnDeviceWith is openOnDevice with the model loaded with mopts.
func openOnDeviceWith(t *testing.T, name string, minRows int, calls *backendCalls, opts gpu.Options, mopts model.Options) (*model.Model, *gpu.Device) {
	t.Helper()
	dev, err := gpu.Open(opts)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Vulkan device (CI needs lavapipe: mesa-vulkan-drivers): %v", err)
		}
		t.Skipf("no Vulkan device: %v", err)
	}
	d, err := loader.Open(context.Background(), fixtures.ModelDir(t, name), loader.Options{Model: mopts})
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		dev.Close()
	})
	fallback := func(err error) { t.Errorf("the backend failed: %v", err) }
	if err := d.Model.SetBackend(&counted{Backend: dev, calls: calls}, model.BackendOptions{MinRows: minRows, OnFallback: fallback}); err != nil {
		t.Fatal(err)
	}
	return d.Model, dev
}

// counted counts a backend's attention and MoE calls.
type counted struct {
	model.Backend
	calls *backendCalls
}

type backendCalls struct{ attention, moe int }

func (c *counted) Attention(out []float32, a *gpu.Attention) error {
	c.calls.attention++
	return c.Backend.Attention(out, a)
}

func (c *counted) MoE(y, x []float32, n int, l *gpu.MoE, fetch gpu.Fetch) (gpu.Routes, error) {
	c.calls.moe++
	return c.Backend.MoE(y, x, n, l, fetch)
}

// TestBackendParityMTP runs the MTP layer over every prompt row of every
// case on the GPU (as prefill absorbs a prompt) and compares its
// predictions with the references'.
func TestBackendParityMTP(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			var calls backendCalls
			m := openOnGPUCounted(t, name, 2, &calls)
			refs, _ := fixtures.LoadRefs(t, name)
			for _, cs := range refs.Cases {
				t.Run(cs.Label, func(t *testing.T) {
					before := calls
					checkMTP(t, m, cs, logitTolerance[name])
					// The prompt's forward runs every layer on the GPU, the MTP
					// forward one more attention and MoE.
					L := m.Config().NumLayers
					if calls.attention-before.attention != L+1 {
						t.Errorf("%d attention calls on the GPU, want %d", calls.attention-before.attention, L+1)
					}
				})
			}
		})
	}
}

// TestBackendComputeAllKeys runs the long cases with DSA rows scoring every
// key and masking the unselected ones on the GPU (the baseline of spool
// bench prefill --compare-all-keys): the same logits and selections.
func TestBackendComputeAllKeys(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := openOnGPU(t, name, 1)
			defer model.SetComputeAllKeys(m, true)()
			refs, refDir := fixtures.LoadRefs(t, name)
			cs := refs.Cases[len(refs.Cases)-1]
			V := m.Config().VocabSize
			tr := &model.Trace{}
			out, err := m.Forward(context.Background(), []model.Request{{Seq: m.NewSequence(0), Tokens: cs.PromptIDs, AllLogits: true}}, tr)
			if err != nil {
				t.Fatal(err)
			}
			want := fixtures.F32File(t, filepath.Join(refDir, cs.LogitsFile), cs.N*V)
			if diff, at := fixtures.MaxAbsDiff(slices.Concat(out[0].Logits...), want); diff > logitTolerance[name] {
				t.Errorf("logits differ by %.3g at row %d (tolerance %g)", diff, at/V, logitTolerance[name])
			}
			checkDSA(t, m, cs, tr)
		})
	}
}

// TestBackendParityFullForward runs every reference case of both fixtures
// through the GPU: logits within the README tolerances, argmax wherever
// the margin allows, router ids exact, DSA selections exact, hidden states.
func TestBackendParityFullForward(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := openOnGPU(t, name, 1)
			refs, refDir := fixtures.LoadRefs(t, name)
			for ci, cs := range refs.Cases {
				t.Run(cs.Label, func(t *testing.T) { checkFullForward(t, m, name, refDir, cs, ci == 0) })
			}
		})
	}
}

// TestBackendParityCopiedExperts runs every reference case of both
// fixtures with the routed experts copied to the device (as on a discrete
// GPU; lavapipe would use them in place): in double-buffered groups whose
// products overlap the next group's copies, and with a store of resident
// experts that the later cases apply from device memory.
func TestBackendParityCopiedExperts(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m, dev := openOnDevice(t, name, 1, &backendCalls{}, gpu.Options{Device: -1, CopyExperts: true, ResidentExpertBytes: 8 << 20})
			refs, refDir := fixtures.LoadRefs(t, name)
			for ci, cs := range refs.Cases {
				t.Run(cs.Label, func(t *testing.T) { checkFullForward(t, m, name, refDir, cs, ci == 0) })
			}
			tm := dev.Times()
			n, bytes := dev.ResidentExperts()
			t.Logf("experts copied %d, resident %d, in place %d; %d resident in %d bytes; copy wait %.3fs of %.3fs copying", tm.ExpertsCopied, tm.ExpertsResident, tm.ExpertsInPlace, n, bytes, tm.CopyWait, tm.Experts)
			if tm.ExpertsCopied == 0 || tm.ExpertsResident == 0 || tm.ExpertsInPlace != 0 || n == 0 {
				t.Errorf("experts copied %d, resident %d (store of %d), in place %d: want copied and resident ones only", tm.ExpertsCopied, tm.ExpertsResident, n, tm.ExpertsInPlace)
			}
		})
	}
}

// TestBackendParityGreedy generates with the prefill on the GPU and the
// one-token decode steps on the CPU, as in production (MinRows above 1),
// and compares with the reference's greedy tokens wherever the margin
// allows. (TestBackendChunkedAndBatched runs one-row forwards on the GPU.)
func TestBackendParityGreedy(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m := openOnGPU(t, name, 2)
			refs, _ := fixtures.LoadRefs(t, name)
			for _, cs := range refs.Cases {
				t.Run(cs.Label, func(t *testing.T) { checkGreedy(t, m, cs) })
			}
		})
	}
}

// TestBackendChunkedAndBatched prefills the long prompt in uneven chunks
// on the GPU (attention over cache entries of earlier chunks; the last
// chunk is one row) and runs two sequences in one forward (one attention
// call per sequence).
func TestBackendChunkedAndBatched(t *testing.T) {
	m := openOnGPU(t, "glm52-mini", 1)
	refs, refDir := fixtures.LoadRefs(t, "glm52-mini")
	V := m.Config().VocabSize
	cs := refs.Cases[len(refs.Cases)-1]
	want := fixtures.F32File(t, filepath.Join(refDir, cs.LogitsFile), cs.N*V)
	seq := m.NewSequence(0)
	worst := 0.0
	for i := 0; i < cs.N; i += 45 {
		toks := cs.PromptIDs[i:min(i+45, cs.N)]
		out, err := m.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: toks, AllLogits: true}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j, lg := range out[0].Logits {
			d, _ := fixtures.MaxAbsDiff(lg, want[(i+j)*V:(i+j+1)*V])
			worst = max(worst, d)
		}
	}
	t.Logf("chunked: max |logit diff| %.3g", worst)
	if worst > logitTolerance["glm52-mini"] {
		t.Errorf("chunked prefill logits differ by %.3g", worst)
	}

	a, b := refs.Cases[0], refs.Cases[1]
	out, err := m.Forward(context.Background(), []model.Request{
		{Seq: m.NewSequence(0), Tokens: a.PromptIDs, AllLogits: true},
		{Seq: m.NewSequence(0), Tokens: b.PromptIDs, AllLogits: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []fixtures.Case{a, b} {
		ref := fixtures.F32File(t, filepath.Join(refDir, c.LogitsFile), c.N*V)
		if d, _ := fixtures.MaxAbsDiff(slices.Concat(out[i].Logits...), ref); d > logitTolerance["glm52-mini"] {
			t.Errorf("batched sequence %d: logits differ by %.3g", i, d)
		}
	}
}

// TestBackendLayerMajor: on the GPU, forwards whose layers go through the
// rows 16 at a time (attention of each step on the device over the keys
// earlier steps wrote, each layer's routed experts applied to every row in
// one MoE call) give every reference case's logits within the tolerance,
// the MTP layer's too, with one MoE call per sparse layer.
func TestBackendLayerMajor(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			calls := &backendCalls{}
			m, _ := openOnDeviceWith(t, name, 1, calls, gpu.Options{Device: -1}, model.Options{Limits: model.Limits{ScratchRows: 16}})
			refs, refDir := fixtures.LoadRefs(t, name)
			for _, cs := range refs.Cases {
				before := *calls
				checkFullForward(t, m, name, refDir, cs, false)
				sparse := len(m.Config().SparseLayers())
				if got := calls.moe - before.moe; got != sparse {
					t.Errorf("%s: %d MoE calls for %d sparse layers", cs.Label, got, sparse)
				}
				if want := (cs.N + 15) / 16 * m.Config().NumLayers; calls.attention-before.attention != want {
					t.Errorf("%s: %d attention calls, want %d (a step of 16 rows a layer)", cs.Label, calls.attention-before.attention, want)
				}
				checkMTP(t, m, cs, logitTolerance[name])
			}
		})
	}
}

// TestBackendBF16KVCache: with a bfloat16 KV cache on the GPU (the cache
// widened as it is uploaded), every reference case's greedy tokens are the
// reference's up to a near-tie, as on the CPU.
func TestBackendBF16KVCache(t *testing.T) {
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			m, _ := openOnDeviceWith(t, name, 1, &backendCalls{}, gpu.Options{Device: -1}, model.Options{KVBF16: true})
			refs, _ := fixtures.LoadRefs(t, name)
			for _, cs := range refs.Cases {
				res, err := generate.Generate(context.Background(), m, m.NewSequence(0), cs.PromptIDs, generate.Params{MaxTokens: len(cs.Greedy)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				same := 0
				for same < len(res.Tokens) && res.Tokens[same] == cs.Greedy[same] {
					same++
				}
				t.Logf("%s: %d of %d greedy tokens equal", cs.Label, same, len(cs.Greedy))
				if same < len(cs.Greedy) && cs.GreedyMargins[same] > bf16Margin {
					t.Errorf("%s: greedy token %d is %d, want %d at a margin of %.3g", cs.Label, same, res.Tokens[same], cs.Greedy[same], cs.GreedyMargins[same])
				}
			}
		})
	}
}
