//go:build unix

package regularfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/testfifo"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.json")
	if err := os.WriteFile(small, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(small, 10); err != nil || string(b) != "{}" {
		t.Fatalf("small file: %q, %v", b, err)
	}
	if _, err := Read(small, 1); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := Read(dir, 1<<20); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a directory: %v", err)
	}
	testfifo.Refused(t, filepath.Join(dir, "fifo"), func() error {
		_, err := Read(filepath.Join(dir, "fifo"), 10)
		return err
	})
}
