//go:build unix

package atomicfile

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestSweep: Sweep removes the temporary files of replacements whose
// writer is gone, and leaves alone one still being written, other files
// of the directory, and the path itself.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "usage.coli_usage")
	if err := WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A writer that died: its descriptor closed without Commit or Abort
	// (what the end of its process does).
	dead, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	dead.Write([]byte("half"))
	live, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Abort()
	dead.File.Close()
	others := []string{".usage.coli_usage.backup.tmp", ".usage.coli_usage.12", "usage.coli_usage.123.tmp", ".other.123.tmp"}
	for _, name := range others {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	removed, err := Sweep(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{dead.Name()}) {
		t.Errorf("removed %q, want only the dead writer's %q", removed, dead.Name())
	}
	for _, p := range append([]string{path, live.Name()}, others...) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := live.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := live.Commit(); err != nil {
		t.Fatalf("the live writer's commit after a sweep: %v", err)
	}
	if removed, _ := Sweep(filepath.Join(dir, "nowhere", "x")); len(removed) != 0 {
		t.Errorf("a missing directory: %q", removed)
	}
}

// TestSweepAfterKill: the temporary file of a process killed while it
// wrote (SIGKILL: no deferred cleanup runs) is swept at the next start,
// and not while the process lives.
func TestSweepAfterKill(t *testing.T) {
	if path := os.Getenv("ATOMICFILE_TEST_WRITER"); path != "" {
		// The writer: start a replacement, say so, and wait to be killed.
		f, err := Create(path, 0o644)
		if err != nil {
			os.Exit(2)
		}
		f.Write([]byte("partial"))
		os.Stdout.WriteString("writing\n")
		select {}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "settings.json")
	cmd := exec.Command(exe, "-test.run=^TestSweepAfterKill$")
	cmd.Env = append(os.Environ(), "ATOMICFILE_TEST_WRITER="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "writing\n" {
		t.Fatalf("the writer said %q (%v)", line, err)
	}
	if removed, _ := Sweep(path); len(removed) != 0 {
		t.Fatalf("swept a live writer's file: %q", removed)
	}
	cmd.Process.Kill()
	cmd.Wait()
	removed, err := Sweep(path)
	if err != nil || len(removed) != 1 {
		t.Fatalf("after the kill: removed %q (%v), want the writer's file", removed, err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 0 {
		t.Errorf("left in the directory: %v", ents)
	}
}
