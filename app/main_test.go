package main

import (
	"os"
	"testing"
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
