// Package frontend holds Spool's web UI (a Vite + TypeScript app in this
// directory) for embedding in the Go binary. `npm ci && npm run build`
// writes dist/; building with -tags embedui embeds it. Without the tag the
// binary carries a one-page placeholder that says how to build the UI, so
// that `go build ./...` works on a fresh checkout with no Node.
//
// It owns no behaviour: engine/server serves the files and app/ hands them
// to the desktop webview.
package frontend

import "io/fs"

// Assets returns the UI's files (index.html at the root) and whether they
// are the built UI rather than the placeholder.
func Assets() (fs.FS, bool) {
	sub, err := fs.Sub(files, root)
	if err != nil {
		// root is a constant directory of the embedded tree.
		panic("frontend: " + err.Error())
	}
	return sub, built
}
