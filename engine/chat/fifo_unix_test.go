//go:build unix

package chat

import (
	"path/filepath"
	"testing"

	"github.com/spoolhq/spool/internal/testfifo"
)

func TestFIFOTemplateIsRefusedWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	testfifo.Refused(t, filepath.Join(dir, "chat_template.jinja"), func() error {
		_, err := LoadTemplate(dir)
		return err
	})
}
