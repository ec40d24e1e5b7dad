package model_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/spoolhq/spool/engine/loader"
	"github.com/spoolhq/spool/engine/model"
	"github.com/spoolhq/spool/internal/fixtures"
	"github.com/spoolhq/spool/kernels"
	"github.com/spoolhq/spool/kernels/gpu"
)

// lostDevice is a backend whose every operation fails, as after a lost
// device.
type lostDevice struct{ kept, calls int }

var errLost = errors.New("device lost")

func (b *lostDevice) Keep(ms ...*kernels.Matrix) error { b.kept += len(ms); return nil }
func (b *lostDevice) MatMulMany([]float32, int, []*kernels.Matrix, [][]float32) error {
	b.calls++
	return errLost
}
func (b *lostDevice) MLP([]float32, *gpu.MLP, []float32, int) error { b.calls++; return errLost }
func (b *lostDevice) MoE([]float32, []float32, int, *gpu.MoE, gpu.Fetch) (gpu.Routes, error) {
	b.calls++
	return gpu.Routes{}, errLost
}
func (b *lostDevice) Attention([]float32, *gpu.Attention) error { b.calls++; return errLost }

// A backend failure mid-forward redoes the forward on the CPU, with the
// same result as a CPU-only model, reports the failure once and leaves the
// backend unused afterwards.
func TestBackendFailureFallsBackToCPU(t *testing.T) {
	d, err := loader.Open(context.Background(), fixtures.Path(t, "glm52-tiny"), loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m := d.Model
	b := &lostDevice{}
	var reported []error
	if err := m.SetBackend(b, model.BackendOptions{MinRows: 2, OnFallback: func(err error) { reported = append(reported, err) }}); err != nil {
		t.Fatal(err)
	}
	if b.kept == 0 || !m.Accelerated() {
		t.Fatal("SetBackend kept no weights")
	}
	refs, _ := fixtures.LoadRefs(t, "glm52-tiny")
	prompt := refs.Cases[1].PromptIDs
	seq := m.NewSequence(0)
	out, err := m.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: prompt, AllLogits: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(reported) != 1 || !errors.Is(reported[0], errLost) {
		t.Fatalf("fallback reported %v", reported)
	}
	if m.Accelerated() || seq.Len() != len(prompt) || seq.Layer(0).Len() != len(prompt) {
		t.Fatalf("after the fallback: accelerated %v, %d tokens and %d layer-0 entries for %d", m.Accelerated(), seq.Len(), seq.Layer(0).Len(), len(prompt))
	}
	cpu := open(t, "glm52-tiny").Model
	want, err := cpu.Forward(context.Background(), []model.Request{{Seq: cpu.NewSequence(0), Tokens: prompt, AllLogits: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want[0].Logits {
		if !slices.Equal(out[0].Logits[i], want[0].Logits[i]) {
			t.Fatalf("row %d: the fallback's logits differ from the CPU's", i)
		}
	}
	calls := b.calls
	if _, err := m.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: prompt[:3]}}, nil); err != nil {
		t.Fatal(err)
	}
	if b.calls != calls {
		t.Error("the failed backend was used again")
	}
}

// A backend failure in the MTP layer redoes the layer on the CPU, with the
// CPU's result.
func TestBackendFailureInMTPFallsBackToCPU(t *testing.T) {
	d, err := loader.Open(context.Background(), fixtures.Path(t, "glm52-tiny"), loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, cpu := d.Model, open(t, "glm52-tiny").Model
	refs, _ := fixtures.LoadRefs(t, "glm52-tiny")
	prompt := refs.Cases[1].PromptIDs
	var logits [2][][]float32
	for i, mm := range []*model.Model{m, cpu} {
		seq := mm.NewSequence(0)
		out, err := mm.Forward(context.Background(), []model.Request{{Seq: seq, Tokens: prompt}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := m.SetBackend(&lostDevice{}, model.BackendOptions{MinRows: 2}); err != nil {
				t.Fatal(err)
			}
		}
		lg, _, err := mm.MTPForward(context.Background(), model.MTPRequest{Seq: seq, Hidden: out[0].Hidden[:len(prompt)-1], Next: prompt[1:]})
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range lg {
			logits[i] = append(logits[i], slices.Clone(row))
		}
		if seq.MTP().Len() != len(prompt)-1 {
			t.Fatalf("MTP cache holds %d rows, want %d", seq.MTP().Len(), len(prompt)-1)
		}
	}
	if m.Accelerated() {
		t.Error("the failed backend is still set")
	}
	for i := range logits[1] {
		if !slices.Equal(logits[0][i], logits[1][i]) {
			t.Fatalf("MTP row %d: the fallback's logits differ from the CPU's", i)
		}
	}
}
