// Command spool is the one Spool binary: the desktop app when double-clicked
// (a Wails window and a menu-bar item over the in-process engine), and a CLI
// from a terminal: app, run, serve, pull, fit, inspect, bench, gen-bench,
// pack and atlas, each in its own cmd_*.go file. Built with -tags headless it
// is a server/CLI binary with no GUI dependency.
//
// It owns the lifecycle of the engine it hosts (host.go: start, run, stop,
// restart on a new configuration), the desktop shell and its settings, and
// the glue that turns flags into engine options. Inference, serving and
// downloading live in engine/; the cgo it needs for the Mac (dock, login
// item) stays in its _darwin files.
package main
