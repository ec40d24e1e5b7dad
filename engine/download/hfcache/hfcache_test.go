package hfcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	r := New("/c", "mateogrgic/GLM-5.2-colibri-int4-with-int8-mtp")
	tests := []struct{ got, want string }{
		{Folder("gpt2"), "models--gpt2"},
		{r.Dir(), "/c/models--mateogrgic--GLM-5.2-colibri-int4-with-int8-mtp"},
		{r.BlobPath("ab"), r.Dir() + "/blobs/ab"},
		{r.IncompletePath("ab"), r.Dir() + "/blobs/ab.incomplete"},
		{r.LockPath("ab"), "/c/.locks/models--mateogrgic--GLM-5.2-colibri-int4-with-int8-mtp/ab.lock"},
		{r.SnapshotPath("c0", "a/b.json"), r.Dir() + "/snapshots/c0/a/b.json"},
		{r.RefPath("refs/pr/1"), r.Dir() + "/refs/refs/pr/1"},
		{LinkTarget("config.json", "e"), "../../blobs/e"},
		{LinkTarget("a/b/c.json", "e"), "../../../../blobs/e"},
	}
	for _, tt := range tests {
		if tt.got != filepath.FromSlash(tt.want) {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestLinkAndRefs(t *testing.T) {
	r := New(t.TempDir(), "o/m")
	commit := strings.Repeat("c", 40)
	if err := os.MkdirAll(filepath.Dir(r.BlobPath("e1")), 0o755); err != nil {
		t.Fatal(err)
	}
	for etag, body := range map[string]string{"e1": "one", "e2": "two"} {
		if err := os.WriteFile(r.BlobPath(etag), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !r.HasBlob("e1", 3) || r.HasBlob("e1", 4) || r.HasBlob("nope", 0) {
		t.Error("HasBlob wrong")
	}
	for _, step := range []struct{ file, etag, want string }{
		{"sub/dir/x.json", "e1", "one"},
		{"sub/dir/x.json", "e2", "two"}, // relinking replaces
		{"y", "e1", "one"},
	} {
		if err := r.Link(commit, step.file, step.etag); err != nil {
			t.Fatal(err)
		}
		p := r.SnapshotPath(commit, step.file)
		target, _ := os.Readlink(p)
		if target != LinkTarget(step.file, step.etag) {
			t.Errorf("%s -> %q", step.file, target)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != step.want {
			t.Errorf("%s reads %q, %v; want %q", step.file, b, err, step.want)
		}
	}
	if _, err := r.ResolveRevision("main"); err == nil {
		t.Error("unknown ref resolved")
	}
	if err := r.WriteRef("main", commit); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ResolveRevision("main"); err != nil || got != commit {
		t.Errorf("ResolveRevision(main) = %q, %v", got, err)
	}
	if got, _ := r.ResolveRevision(strings.ToUpper(commit)); got != commit {
		t.Errorf("a commit does not resolve to itself: %q", got)
	}
	if err := os.WriteFile(r.RefPath("bad"), []byte("not a commit"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ResolveRevision("bad"); err == nil || !strings.Contains(err.Error(), "not a commit") {
		t.Errorf("bad ref: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(r.RefPath("main")))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
