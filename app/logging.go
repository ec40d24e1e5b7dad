package main

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/term"
)

// newLogger is the log of a command, written to w one line a record,
// readable in a terminal ("15:04:05.000 INF request endpoint=... status=200"),
// in color when w is one. Attribute values that need it are quoted, so
// that a client's string (a path, a tool name) cannot start a line of its
// own. Records below level are dropped.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	color := false
	if f, ok := w.(*os.File); ok {
		color = term.IsTerminal(int(f.Fd()))
	}
	return slog.New(tint.NewHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly + ".000", NoColor: !color}))
}
