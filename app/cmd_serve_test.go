package main

import (
	"bytes"
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

// TestSecretFlagsWarned: a key given as a flag, which every local user
// can read in the process list, is warned about (naming the variable that
// keeps it out of sight), and --help says so; the variable is not.
func TestSecretFlagsWarned(t *testing.T) {
	run := func(env string, args ...string) string {
		t.Helper()
		t.Setenv("SPOOL_API_KEY", env)
		var out bytes.Buffer
		root := newRootCmd()
		root.SetArgs(args)
		root.SetOut(&out)
		root.SetErr(&out)
		root.Execute()
		return out.String()
	}
	missing := filepath.Join(t.TempDir(), "no-model")
	if got := run("", "serve", "--model", missing, "--api-key", "k", "--remote-key", "r"); !strings.Contains(got, "--api-key can be read by every user") ||
		!strings.Contains(got, "set $SPOOL_API_KEY instead") || !strings.Contains(got, "--remote-key can be read") {
		t.Errorf("serve with keys as flags said:\n%s", got)
	}
	if got := run("k", "serve", "--model", missing); strings.Contains(got, "can be read by every user") {
		t.Errorf("serve with the key in the environment warned:\n%s", got)
	}
	if got := run("", "serve", "--help"); !strings.Contains(got, "process list") {
		t.Errorf("serve --help does not say a flag's key can be read:\n%s", got)
	}
}
