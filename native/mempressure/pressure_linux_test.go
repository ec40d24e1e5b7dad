//go:build linux

package mempressure

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartRegistersPSITriggers registers the production triggers with
// this kernel and stops them again.
func TestStartRegistersPSITriggers(t *testing.T) {
	m, err := Start(context.Background())
	if _, statErr := os.Stat("/proc/pressure/memory"); statErr != nil {
		// A kernel without PSI: Start must say so, clearly.
		if err == nil || !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("no /proc/pressure/memory, yet Start returned %v (want errors.ErrUnsupported)", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Start on a kernel with PSI: %v", err)
	}
	if !strings.HasSuffix(m.Source(), "memory.pressure") && m.Source() != "/proc/pressure/memory" {
		t.Fatalf("source %q is no PSI memory file", m.Source())
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, open := <-m.Levels(); open {
		t.Fatal("Levels still open after Close")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

func TestStartStopsWithItsContext(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/memory"); err != nil {
		t.Fatalf("this test needs PSI (/proc/pressure/memory): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range m.Levels() {
	}
	if err := m.Err(); err != nil {
		t.Fatalf("stopped by its context with %v", err)
	}
}

// TestStartFallsBackToTheMachine: a cgroup file that refuses triggers (here
// one that does not exist; for an unprivileged process, root's) gives way
// to /proc/pressure/memory.
func TestStartFallsBackToTheMachine(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/memory"); err != nil {
		t.Fatalf("this test needs PSI (/proc/pressure/memory): %v", err)
	}
	m, err := startFirst(context.Background(), []string{filepath.Join(t.TempDir(), "memory.pressure"), "/proc/pressure/memory"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Source() != "/proc/pressure/memory" {
		t.Fatalf("source %q", m.Source())
	}
}

func TestTriggerErrorsNameTheProblem(t *testing.T) {
	_, err := startPSI(context.Background(), filepath.Join(t.TempDir(), "no-such-pressure"), WarnStall, CritStall)
	if err == nil || !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "no-such-pressure") {
		t.Fatalf("a missing PSI file gave %v", err)
	}
	// The kernel refuses a window that is no multiple of 2 s for
	// unprivileged triggers and a stall longer than the window always.
	if _, err := openTrigger("/proc/pressure/memory", "some", 3*Window); err == nil || !strings.Contains(err.Error(), "registering the trigger") {
		t.Fatalf("an impossible trigger gave %v", err)
	}
}

// TestPSITriggerFiresUnderMemoryHog runs a page-cache hog in a memory
// cgroup of 16 MiB (reading a 96 MiB file it wrote, over and over: every
// read refaults), and waits for the real PSI trigger to report Warning (or
// Critical), then for Normal once the hog is gone. It needs a memory cgroup
// it can create (root, or a delegated cgroup v2 subtree).
func TestPSITriggerFiresUnderMemoryHog(t *testing.T) {
	cg, procs, err := hogCgroup(t, 16<<20)
	if err != nil {
		if os.Geteuid() == 0 {
			// Root can always make a memory cgroup where the kernel has the
			// controller: failing to is a defect, not an environment.
			t.Fatalf("no memory cgroup to confine a hog, as root: %v", err)
		}
		t.Skipf("needs a memory cgroup it can create (root or a delegated subtree): %v; the trigger path is covered by TestStartRegistersPSITriggers", err)
	}
	// A lower stall than production's so a hog on a busy 2-core machine
	// fires it within a few windows; the path is Start's.
	m, err := startPSI(context.Background(), psiPaths()[0], 20*time.Millisecond, CritStall)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	file := filepath.Join(t.TempDir(), "hog")
	script := fmt.Sprintf(`echo $$ > %s && head -c %d /dev/urandom > %s && for i in $(seq 2000); do cat %s > /dev/null; done`, procs, 96<<20, file, file)
	hog := exec.Command("sh", "-c", script)
	hog.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	stopHog := func() { syscall.Kill(-hog.Process.Pid, syscall.SIGKILL) }
	defer stopHog()
	exited := make(chan error, 1)
	go func() { exited <- hog.Wait() }()
	var got Level
	select {
	case got = <-m.Levels():
	case err := <-exited:
		t.Fatalf("the hog read 2000 x 96 MiB through a 16 MiB cgroup (%v) and no PSI trigger fired", err)
	}
	if got != Warning && got != Critical {
		t.Fatalf("first level under the hog: %v", got)
	}
	t.Logf("%s reported %v under the hog in %s", m.Source(), got, cg)
	stopHog()
	for l := range m.Levels() {
		if l == Normal {
			return
		}
	}
	t.Fatalf("the levels ended without Normal: %v", m.Err())
}

// hogCgroup creates a memory cgroup limited to limit bytes under this
// process's own (cgroup v1's memory controller, else cgroup v2) and
// returns it and the file that moves a process into it; it is removed at
// the end of the test.
func hogCgroup(t *testing.T, limit int64) (dir, procs string, err error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	var v1, v2 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1 = parts[2]
		}
	}
	try := func(base, limitFile string) (string, string, error) {
		d := filepath.Join(base, fmt.Sprintf("spool-psi-test-%d", os.Getpid()))
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", "", err
		}
		t.Cleanup(func() { os.Remove(d) })
		if err := os.WriteFile(filepath.Join(d, limitFile), []byte(fmt.Sprint(limit)), 0); err != nil {
			return "", "", err
		}
		return d, filepath.Join(d, "cgroup.procs"), nil
	}
	var errs []error
	if v1 != "" {
		d, p, err := try(filepath.Join("/sys/fs/cgroup/memory", v1), "memory.limit_in_bytes")
		if err == nil {
			return d, p, nil
		}
		errs = append(errs, err)
	}
	if v2 != "" {
		d, p, err := try(filepath.Join("/sys/fs/cgroup", v2), "memory.max")
		if err == nil {
			return d, p, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no memory controller in /proc/self/cgroup"))
	}
	return "", "", errors.Join(errs...)
}
