package fingerprint

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadStoreSweepsLeftovers: a save of the digest store that a kill
// cut short leaves a temporary file that the next load removes.
func TestLoadStoreSweepsLeftovers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fingerprints.json")
	leftover := filepath.Join(dir, ".fingerprints.json.99182.tmp")
	if err := os.WriteFile(leftover, []byte(`{"version":`), 0o644); err != nil {
		t.Fatal(err)
	}
	loadStore(path, slog.New(slog.DiscardHandler))
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("the leftover is still there (%v)", err)
	}
}
