package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSettingsStoreSweepsLeftovers: a save of the settings that a kill
// cut short leaves a temporary file that the next start removes.
func TestSettingsStoreSweepsLeftovers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	leftover := filepath.Join(dir, ".settings.json.771.tmp")
	if err := os.WriteFile(leftover, []byte(`{"model":`), 0o644); err != nil {
		t.Fatal(err)
	}
	newSettingsStore(path)
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("the leftover is still there (%v)", err)
	}
}
