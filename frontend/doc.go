// Package frontend holds Spool's web UI (a Vite + TypeScript app in this
// directory) for embedding in the Go binary. `npm ci && npm run build`
// writes dist/; building with -tags embedui embeds it. Without the tag the
// binary carries a one-page placeholder that says how to build the UI, so
// that `go build ./...` works on a fresh checkout with no Node.
//
// It owns no behaviour: engine/server serves the files and app/ hands them
// to the desktop webview.
package frontend
