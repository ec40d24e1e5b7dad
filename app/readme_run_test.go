package main

// The runner of the README's sh blocks (see readme_test.go): a scratch
// repository root, one shell per command, and the servers a block starts.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readmeEnv is the directory the sh blocks run in.
type readmeEnv struct {
	root string // laid out as the repository root
	tmp  string // what /tmp/ means in the examples
	env  []string
}

// newReadmeEnv lays out a scratch repository root: every top-level entry
// of the repository linked in, except bin/, which holds a bin/spool that
// runs this test binary as spool.
func newReadmeEnv(t *testing.T, repo string) *readmeEnv {
	t.Helper()
	scratch := t.TempDir()
	e := &readmeEnv{root: filepath.Join(scratch, "repo"), tmp: filepath.Join(scratch, "tmp")}
	home := filepath.Join(scratch, "home")
	for _, d := range []string{filepath.Join(e.root, "bin"), e.tmp, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range entries {
		if de.Name() == "bin" || de.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(repo, de.Name()), filepath.Join(e.root, de.Name())); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	shim := fmt.Sprintf("#!/bin/sh\n%s=1 exec %s \"$@\"\n", runMainEnv, shellQuote(exe))
	if err := os.WriteFile(filepath.Join(e.root, "bin", "spool"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	e.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"TMPDIR=" + e.tmp,
		"LANG=C.UTF-8",
	}
	return e
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// readmeResult is what one README command printed.
type readmeResult struct {
	cmd    shellCommand
	stdout string
}

// expectedStatus is the exit status a command's comment names, else 0.
var expectedStatus = regexp.MustCompile(`exit status (\d+)`)

// runBlock runs an sh block's commands and returns their results.
func (e *readmeEnv) runBlock(t *testing.T, b readmeBlock) []readmeResult {
	t.Helper()
	var results []readmeResult
	var server *readmeServer
	addr := readmePlaceholderAddr
	for _, c := range shellCommands(b) {
		text := strings.ReplaceAll(c.text, "/tmp/", e.tmp+"/")
		text = strings.ReplaceAll(text, readmePlaceholderAddr, addr)
		prog, args := program(shellSegments(c.text)[0])
		if prog == "bin/spool" && len(args) > 0 && args[0] == "serve" {
			if server != nil {
				t.Fatalf("README.md:%d: a second server in one block", c.line)
			}
			server = e.startServer(t, c, text)
			addr = strings.TrimPrefix(server.url, "http://")
			results = append(results, readmeResult{cmd: c})
			continue
		}
		results = append(results, e.run(t, c, text))
	}
	if server != nil {
		server.stop(t)
	}
	return results
}

// run runs one command and checks its exit status and output.
func (e *readmeEnv) run(t *testing.T, c shellCommand, text string) readmeResult {
	t.Helper()
	want := 0
	if m := expectedStatus.FindStringSubmatch(c.comment); m != nil {
		want, _ = strconv.Atoi(m[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", text)
	cmd.Dir, cmd.Env = e.root, e.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		t.Fatalf("README.md:%d: %s: %v", c.line, c.text, err)
	}
	t.Logf("README.md:%d: %s: exit status %d in %.1fs", c.line, c.text, got, time.Since(start).Seconds())
	if got != want {
		t.Errorf("README.md:%d: %s\nexit status %d, want %d\nstdout:\n%s\nstderr:\n%s", c.line, c.text, got, want, tail(stdout.String()), tail(stderr.String()))
	}
	segs := shellSegments(c.text)
	if prog, args := program(segs[0]); len(segs) == 1 && (prog == "curl" || (prog == "bin/spool" && slices.Contains(args, "--json"))) {
		if !json.Valid(stdout.Bytes()) {
			t.Errorf("README.md:%d: %s: the output is not JSON:\n%s", c.line, c.text, tail(stdout.String()))
		}
	}
	return readmeResult{cmd: c, stdout: stdout.String()}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// readmeServer is a `spool serve` an sh block started.
type readmeServer struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	log  bytes.Buffer
	done chan error
}

// startServer starts a serve line on a free port (a later --port wins) and
// waits until it listens.
func (e *readmeEnv) startServer(t *testing.T, c shellCommand, text string) *readmeServer {
	t.Helper()
	s := &readmeServer{cmd: exec.Command("bash", "-c", "exec "+text+" --port 0"), done: make(chan error, 1)}
	s.cmd.Dir, s.cmd.Env = e.root, e.env
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill() })
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				listening <- m[1]
			}
		}
		s.done <- s.cmd.Wait()
	}()
	select {
	case s.url = <-listening:
	case err := <-s.done:
		t.Fatalf("README.md:%d: %s exited (%v):\n%s", c.line, c.text, err, s.output())
	case <-time.After(2 * time.Minute):
		t.Fatalf("README.md:%d: %s did not start listening:\n%s", c.line, c.text, s.output())
	}
	t.Logf("README.md:%d: %s: serving on %s", c.line, c.text, s.url)
	return s
}

func (s *readmeServer) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return tail(s.log.String())
}

// stop interrupts the server, as Ctrl-C does; it must exit 0.
func (s *readmeServer) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("spool serve exited with %v after an interrupt:\n%s", err, s.output())
		}
	case <-time.After(time.Minute):
		t.Errorf("spool serve did not stop within a minute of an interrupt:\n%s", s.output())
	}
}
