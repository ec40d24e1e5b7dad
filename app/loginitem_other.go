//go:build !darwin

package main

import "errors"

// Start at login is a macOS menu item only.
func loginItemSupported() bool { return false }

func loginItemEnabled() bool { return false }

func setLoginItem(bool) error { return errors.New("start at login is supported on macOS only") }
