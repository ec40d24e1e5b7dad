package speed

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadSweepsLeftovers: a save of the probes that a kill cut short
// leaves a temporary file that the next load removes.
func TestLoadSweepsLeftovers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "probes.json")
	leftover := filepath.Join(dir, ".probes.json.5521.tmp")
	if err := os.WriteFile(leftover, []byte(`{`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrNoProbes) {
		t.Fatalf("Load: %v, want ErrNoProbes", err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("the leftover is still there (%v)", err)
	}
}
