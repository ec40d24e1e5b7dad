package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/internal/fixtures"
)

// inspectFixture returns ../shared/fixtures/<model> from the module root
// (skipped, or failed under CI, when the fixtures are absent).
func inspectFixture(t *testing.T, model string) string {
	t.Helper()
	return fixtures.Path(t, model)
}

func runInspect(args ...string) (string, error) { return execute(newInspectCmd(), args...) }

func TestInspectTable(t *testing.T) {
	out, err := runInspect("--model", inspectFixture(t, "glm52-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MTP present, DSA present", "int4-row", "64, 63 in one read, 1 split", "layer 1 expert 5", "resident bytes"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectJSON(t *testing.T) {
	out, err := runInspect("--model", inspectFixture(t, "glm52-mini"), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var s container.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("output is not one JSON summary: %v\n%s", err, out)
	}
	if s.Experts.Count != 384 || len(s.Experts.Split) != 1 || s.Experts.Split[0] != (container.ExpertRef{Layer: 2, Expert: 17}) {
		t.Errorf("experts %+v, want 384 with layer 2 expert 17 split", s.Experts)
	}
}

func TestInspectInvalid(t *testing.T) {
	src := inspectFixture(t, "glm52-tiny")
	dir := t.TempDir()
	// The config and one main shard only: most tensors are missing.
	for _, name := range []string{"config.json", "out-00000.safetensors"} {
		raw, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := runInspect("--model", dir)
	if err == nil || !strings.Contains(err.Error(), `"model.layers.2.input_layernorm.weight" is missing`) {
		t.Errorf("inspect of an incomplete container: %v", err)
	}
}
