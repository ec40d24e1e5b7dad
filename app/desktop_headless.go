//go:build headless

package main

import (
	"context"
	"errors"
)

// desktopAvailable is false: this build has no desktop shell.
func desktopAvailable() bool { return false }

func runDesktop(context.Context, *appRuntime) error {
	return errors.New("this binary was built without the desktop shell (-tags headless); run with --no-window")
}
