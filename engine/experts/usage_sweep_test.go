package experts_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolhq/spool/engine/experts"
)

// TestLoadUsageSweepsLeftovers: a save of the usage history that a kill
// cut short (its temporary file, no writer alive) is removed when the
// history is next loaded; the history itself is read as it was.
func TestLoadUsageSweepsLeftovers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model-0123456789abcdef.coli_usage")
	if err := os.WriteFile(path, []byte("-1 2 4\n1 3 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, ".model-0123456789abcdef.coli_usage.284719.tmp")
	if err := os.WriteFile(leftover, []byte("-1 2 4\n1 3"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := experts.LoadUsage(path, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("the leftover is still there (%v)", err)
	}
	if got.Total() != 5 {
		t.Errorf("history total %d, want 5", got.Total())
	}
}
