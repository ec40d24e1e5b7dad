package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/host"
	sharedfixtures "github.com/spoolhq/spool/internal/fixtures"
)

// TestServeContext: --context is checked against the model and the plan;
// without it serve plans the largest context that fits, up to 32k.
func TestServeContext(t *testing.T) {
	dir := sharedfixtures.Path(t, "glm52-mini")
	cfg := hostConfig{Config: host.Config{ModelDir: dir, MaxBatch: 4, Memory: host.Memory{Budget: "8GiB"}}}
	if got, err := serveContext(dir, cfg); err != nil || got != maxDefaultContext {
		t.Errorf("default: %d %v, want %d", got, err, maxDefaultContext)
	}
	cfg.Context = 8192
	if got, err := serveContext(dir, cfg); err != nil || got != 8192 {
		t.Errorf("--context 8192: %d %v", got, err)
	}
	cfg.Context = 40000
	if _, err := serveContext(dir, cfg); err == nil || !strings.Contains(err.Error(), "32768 positions") {
		t.Errorf("--context 40000: %v", err)
	}
	// 64 sequences at 32k do not fit 6 GiB: the default shrinks to the
	// largest multiple of 1024 that does, and asking for more is refused.
	cfg = hostConfig{Config: host.Config{ModelDir: dir, MaxBatch: 64, Memory: host.Memory{Budget: "6GiB"}}}
	got, err := serveContext(dir, cfg)
	if err != nil || got >= maxDefaultContext || got < 1024 || got%1024 != 0 {
		t.Fatalf("shrunk default: %d %v", got, err)
	}
	cfg.Context = got + 1024
	if _, err := serveContext(dir, cfg); err == nil {
		t.Errorf("--context %d fits, but the default chose %d", got+1024, got)
	}
	if _, err := serveContext(filepath.Join(t.TempDir(), "none"), cfg); err == nil {
		t.Error("a missing model directory is not an error")
	}
}
