package sysinfo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDiskFree(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, wantPath string
	}{
		{"directory", dir, dir},
		{"missing subdirectories", filepath.Join(dir, "a", "b", "c"), dir},
		{"file", file, dir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, err := DiskFree(tt.path)
			if err != nil {
				t.Fatalf("DiskFree(%q): %v", tt.path, err)
			}
			if ds.Path != tt.wantPath {
				t.Errorf("Path = %q, want %q", ds.Path, tt.wantPath)
			}
			if ds.Total == 0 {
				t.Errorf("Total = 0 for %s", ds.Path)
			}
			if ds.Available > ds.Total {
				t.Errorf("Available %d > Total %d", ds.Available, ds.Total)
			}
			if ds.Important < ds.Available {
				t.Errorf("Important %d < Available %d", ds.Important, ds.Available)
			}
		})
	}
}
