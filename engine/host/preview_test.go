package host

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/fixtures"
)

// TestFitContext: a context asked for is checked against the model and
// the plan; without one the largest context that fits is planned, up to
// the most asked for.
func TestFitContext(t *testing.T) {
	const most = 32768
	dir := fixtures.Path(t, "glm52-mini")
	cfg := Config{ModelDir: dir, MaxBatch: 4, Memory: Memory{Budget: "8GiB"}}
	if got, err := FitContext(cfg, most); err != nil || got != most {
		t.Errorf("default: %d %v, want %d", got, err, most)
	}
	cfg.Context = 8192
	if got, err := FitContext(cfg, most); err != nil || got != 8192 {
		t.Errorf("--context 8192: %d %v", got, err)
	}
	cfg.Context = 40000
	if _, err := FitContext(cfg, most); err == nil || !strings.Contains(err.Error(), "32768 positions") {
		t.Errorf("--context 40000: %v", err)
	}
	// 64 sequences at 32k do not fit 6 GiB: the default shrinks to the
	// largest multiple of 1024 that does, and asking for more is refused.
	cfg = Config{ModelDir: dir, MaxBatch: 64, Memory: Memory{Budget: "6GiB"}}
	got, err := FitContext(cfg, most)
	if err != nil || got >= most || got < 1024 || got%1024 != 0 {
		t.Fatalf("shrunk default: %d %v", got, err)
	}
	cfg.Context = got + 1024
	if _, err := FitContext(cfg, most); err == nil {
		t.Errorf("--context %d fits, but the default chose %d", got+1024, got)
	}
	cfg.ModelDir = filepath.Join(t.TempDir(), "none")
	if _, err := FitContext(cfg, most); err == nil {
		t.Error("a missing model directory is not an error")
	}
}

// TestPreviewOpen: the preview plans what Open loads, and says why the GPU
// is not used.
func TestPreviewOpen(t *testing.T) {
	cfg := Config{ModelDir: fixtures.DemoModel(), Memory: Memory{Budget: "8GiB"}, Context: 512, MaxBatch: 1, GPU: GPUOff}
	pv, err := PreviewOpen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Plan.Context != 512 || pv.Plan.Sequences != 1 || pv.GPU.Active || pv.GPU.Reason != "--gpu off" || pv.Model.VocabSize == 0 {
		t.Errorf("preview: context %d, sequences %d, GPU %+v", pv.Plan.Context, pv.Plan.Sequences, pv.GPU)
	}
	cfg.Memory.Budget = "1MiB"
	if _, err := PreviewOpen(cfg); err == nil {
		t.Error("a plan that does not fit previews")
	}
}
