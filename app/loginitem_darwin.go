//go:build darwin

package main

import (
	"errors"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
)

// The login item is a per-user LaunchAgent that opens the app bundle.
const loginAgentLabel = "com.spoolhq.spool"

func loginAgentPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "Library", "LaunchAgents", loginAgentLabel+".plist"), nil
}

func loginItemSupported() bool { return true }

func loginItemEnabled() bool {
	p, err := loginAgentPath()
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// setLoginItem writes or removes the LaunchAgent. It opens the enclosing
// .app with open(1) so that macOS treats it as the app, not a tool.
func setLoginItem(on bool) error {
	p, err := loginAgentPath()
	if err != nil {
		return err
	}
	if !on {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	target := exe
	if i := strings.Index(exe, ".app/Contents/MacOS/"); i >= 0 {
		target = exe[:i+len(".app")]
	}
	plist := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key><string>%s</string>
	<key>ProgramArguments</key>
	<array><string>/usr/bin/open</string><string>%s</string></array>
	<key>RunAtLoad</key><true/>
</dict>
</plist>
`, loginAgentLabel, html.EscapeString(target))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(plist), 0o644)
}
