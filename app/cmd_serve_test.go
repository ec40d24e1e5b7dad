package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretFlagsWarned: a key given as a flag, which every local user
// can read in the process list, is warned about (naming the variable that
// keeps it out of sight), and --help says so; the variable is not.
func TestSecretFlagsWarned(t *testing.T) {
	run := func(env string, args ...string) string {
		t.Helper()
		t.Setenv("SPOOL_API_KEY", env)
		var out bytes.Buffer
		root := newRootCmd()
		root.SetArgs(args)
		root.SetOut(&out)
		root.SetErr(&out)
		root.Execute()
		return out.String()
	}
	missing := filepath.Join(t.TempDir(), "no-model")
	if got := run("", "serve", "--model", missing, "--api-key", "k", "--remote-key", "r"); !strings.Contains(got, "--api-key can be read by every user") ||
		!strings.Contains(got, "set $SPOOL_API_KEY instead") || !strings.Contains(got, "--remote-key can be read") {
		t.Errorf("serve with keys as flags said:\n%s", got)
	}
	if got := run("k", "serve", "--model", missing); strings.Contains(got, "can be read by every user") {
		t.Errorf("serve with the key in the environment warned:\n%s", got)
	}
	if got := run("", "serve", "--help"); !strings.Contains(got, "process list") {
		t.Errorf("serve --help does not say a flag's key can be read:\n%s", got)
	}
}
