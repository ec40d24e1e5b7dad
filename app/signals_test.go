package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spoolhq/spool/internal/fixtures"
)

// TestServeStopsOnHangup: closing the terminal that runs `spool serve`
// (SIGHUP) stops it as Ctrl-C and SIGTERM do: it exits 0 having written
// the prompt cache's blocks and the usage history. It used to die at
// once, with neither on disk.
func TestServeStopsOnHangup(t *testing.T) {
	model := fixtures.Path(t, "glm52-mini")
	cacheHome := t.TempDir()
	dir := t.TempDir()
	env := []string{"XDG_CACHE_HOME=" + cacheHome}
	p := startServe(t, env, "--model", model, "--context", "2048", "--max-batch", "2", "--prompt-cache", dir)
	p.chat(t, []map[string]string{{"role": "user", "content": "What does the function os.path.join do? Answer in one line, with an example of its use."}})
	p.cmd.Process.Signal(syscall.SIGHUP)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("spool serve exited with %v after SIGHUP:\n%s", err, p.log())
		}
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		t.Fatalf("spool serve did not stop on SIGHUP:\n%s", p.log())
	}
	blocks, _ := filepath.Glob(filepath.Join(dir, "*", "*.blk"))
	usage, _ := filepath.Glob(filepath.Join(cacheHome, "Spool", "usage", "*.coli_usage"))
	if len(blocks) == 0 || len(usage) == 0 {
		t.Errorf("after SIGHUP: %d prompt-cache blocks, %d usage histories on disk, want some of each\n%s", len(blocks), len(usage), p.log())
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}
