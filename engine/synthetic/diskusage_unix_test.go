//go:build unix

package synthetic

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// diskUsage sums the allocated blocks of the files in dir.
func diskUsage(t *testing.T, dir string) (int64, bool) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return 0, false
		}
		used += int64(st.Blocks) * 512
	}
	return used, true
}
