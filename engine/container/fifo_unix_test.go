//go:build unix

package container

import (
	"path/filepath"
	"testing"

	"github.com/spoolhq/spool/internal/testfifo"
)

func TestFIFOShardIsRefusedWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	testfifo.Refused(t, filepath.Join(dir, "model-00001-of-00001.safetensors"), func() error {
		_, err := Open(dir)
		return err
	})
}
