//go:build !headless && (!darwin || !cgo)

package main

// setAccessoryPolicy and activateApp matter on macOS only.
func setAccessoryPolicy() {}

func activateApp() {}
