package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"github.com/spf13/cobra"
)

// version is stamped by the build (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	// Ctrl-C, a kill and the hang-up of the terminal that runs it
	// (closing the terminal of a `spool serve`) end a command through its
	// context, so that it stops on its own terms: serve lets the requests
	// in flight finish and saves the prompt cache and the usage history.
	// A second signal while it stops ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	context.AfterFunc(ctx, stop) // the next signal takes its default action
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "spool:", err)
		os.Exit(1)
	}
}

// exitError carries a specific exit status for a command whose result was
// already printed (for example `spool fit` when the model does not fit).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "spool",
		Short:         "Spool runs GLM-5.2 on a Mac with 32 GB of memory",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// --cpuprofile and --trace are for developers measuring a whole
	// command: where its CPU time goes, and where its wall time goes (the
	// Go execution trace: every goroutine's runs, waits and syscalls).
	var cpuProfile, traceOut string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the command to this file")
	root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentFlags().StringVar(&traceOut, "trace", "", "write a Go execution trace of the command to this file")
	root.PersistentFlags().MarkHidden("trace")
	var stops []func()
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		for _, rec := range []struct {
			path  string
			start func(io.Writer) error
			stop  func()
		}{
			{cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile},
			{traceOut, trace.Start, trace.Stop},
		} {
			if rec.path == "" {
				continue
			}
			f, err := os.Create(rec.path)
			if err != nil {
				return err
			}
			if err := rec.start(f); err != nil {
				f.Close()
				return err
			}
			stops = append(stops, func() { rec.stop(); f.Close() })
		}
		return nil
	}
	root.PersistentPostRun = func(*cobra.Command, []string) {
		for _, stop := range stops {
			stop()
		}
	}
	root.RunE = defaultRun
	root.AddCommand(
		// Each command lives in its own cmd_*.go file.
		newAppCmd(),
		newAtlasCmd(),
		newBenchCmd(),
		newFitCmd(),
		newGenBenchCmd(),
		newInspectCmd(),
		newPackCmd(),
		newPullCmd(),
		newRunCmd(),
		newServeCmd(),
	)
	return root
}
