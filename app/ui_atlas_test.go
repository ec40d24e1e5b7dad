//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/testfifo"
)

// experts.json is read on every GET /ui/atlas: a FIFO in the model
// directory answers an error instead of hanging the request, and a huge
// file is refused by its size.
func TestAtlasFileRefusedUnread(t *testing.T) {
	dm := newDownloadManager(nil)
	defer dm.Close()
	dir := t.TempDir()
	u := newUIAPI(dir, newSettingsStore(filepath.Join(t.TempDir(), "settings.json")), dm)
	path := filepath.Join(dir, "experts.json")
	testfifo.Refused(t, path, func() error {
		code, v, err := serve(u, "GET", "/ui/atlas", "")
		if err != nil {
			return err
		}
		if code != 500 {
			return fmt.Errorf("status %d", code)
		}
		return errors.New(fmt.Sprint(v))
	})
	os.Remove(path)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(maxAtlasBytes + 1)
	f.Close()
	if code, v, _ := serve(u, "GET", "/ui/atlas", ""); code != 500 || !strings.Contains(fmt.Sprint(v), "more than") {
		t.Fatalf("a huge experts.json: %d %v", code, v)
	}
}
