// Package packaging holds what ships Spool to Mac users outside the build:
// the Homebrew cask (spool.rb). Its test checks, on any machine, that the
// release recipes agree with each other: the cask downloads the DMG the
// macOS workflow's release job publishes under the name make dmg gives
// it, the macOS job runs the README's Mac commands, and every file the
// recipes name exists. It has no Go API.
package packaging
