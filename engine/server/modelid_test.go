package server

import "testing"

// TestModelIDFromDir: a directory's name, or a hub repository's for its
// revisions in the Hugging Face cache and in Spool's store.
func TestModelIDFromDir(t *testing.T) {
	for dir, want := range map[string]string{
		"/models/glm52-demo": "glm52-demo",
		"/c/hub/models--mateogrgic--GLM-5.2-colibri-int4-with-int8-mtp/snapshots/3cc8db99b1b13fc79325d987ba3c1c430766b3b8": "GLM-5.2-colibri-int4-with-int8-mtp",
		"/s/Models/models--mateogrgic--GLM-5.2-colibri-int4-with-int8-mtp/3cc8db99b1b13fc79325d987ba3c1c430766b3b8":        "GLM-5.2-colibri-int4-with-int8-mtp",
		"/": "spool",
	} {
		if got := ModelIDFromDir(dir); got != want {
			t.Errorf("%s: %q, want %q", dir, got, want)
		}
	}
}
