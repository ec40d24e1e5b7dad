//go:build unix

package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolhq/spool/internal/testfifo"
)

func TestFIFOConfigIsRefusedWithoutBlocking(t *testing.T) {
	for _, name := range []string{"config.json", "generation_config.json"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if name != "config.json" {
				if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			testfifo.Refused(t, filepath.Join(dir, name), func() error {
				_, err := Load(dir)
				return err
			})
		})
	}
}
