// Package status owns where the engine stands, in one vocabulary (Phase):
// its lifecycle (stopped, loading, failed), and while it serves, ready or
// the phase of its busiest request (queued, prefilling, generating), or a
// remote engine's (connecting, unreachable). A Board keeps it: the app's
// host sets the lifecycle, the server's requests report their progress,
// and everything that shows it — the UI's events websocket, /stats, the
// menu bar, the shell's page — reads the Board and subscribes to its
// changes instead of polling. Request rates are timed on a clock the
// tests can fake (internal/clock).
package status
