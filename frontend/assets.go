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
