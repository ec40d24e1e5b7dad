package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/spf13/cobra"
)

// runMainEnv, set in a test binary's environment, makes it run spool's main
// with its arguments instead of the tests: tests start real spool
// processes (serve, stopped and started again) from their own binary.
const runMainEnv = "SPOOL_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// execute runs cmd with args and returns what it wrote to standard output
// and standard error, interleaved.
func execute(cmd *cobra.Command, args ...string) (string, error) {
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// runSpool runs the root command with args and returns its output.
func runSpool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return execute(newRootCmd(), args...)
}
