package hfcache

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spoolhq/spool/internal/atomicfile"
)

// Repo is one model repository's folder in a cache.
type Repo struct {
	CacheDir string // the hub cache (HF_HUB_CACHE)
	ID       string // owner/name
}

// New returns the cache folder of model repository id under cacheDir.
func New(cacheDir, id string) Repo { return Repo{CacheDir: cacheDir, ID: id} }

// Folder is the repository's folder name: "models--" + id with "/"
// replaced by "--" (casing kept).
func Folder(id string) string { return "models--" + strings.ReplaceAll(id, "/", "--") }

// Dir is <cache>/models--<owner>--<name>.
func (r Repo) Dir() string { return filepath.Join(r.CacheDir, Folder(r.ID)) }

// BlobPath is blobs/<etag>.
func (r Repo) BlobPath(etag string) string { return filepath.Join(r.Dir(), "blobs", etag) }

// IncompletePath is blobs/<etag>.incomplete, where a blob is downloaded
// before it is verified and renamed into place.
func (r Repo) IncompletePath(etag string) string { return r.BlobPath(etag) + ".incomplete" }

// LockPath is <cache>/.locks/<folder>/<etag>.lock, the file huggingface_hub
// locks while it writes that blob.
func (r Repo) LockPath(etag string) string {
	return filepath.Join(r.CacheDir, ".locks", Folder(r.ID), etag+".lock")
}

// SnapshotDir is snapshots/<commit>.
func (r Repo) SnapshotDir(commit string) string { return filepath.Join(r.Dir(), "snapshots", commit) }

// SnapshotPath is snapshots/<commit>/<file>, file being '/'-separated.
func (r Repo) SnapshotPath(commit, file string) string {
	return filepath.Join(r.SnapshotDir(commit), filepath.FromSlash(file))
}

// RefPath is refs/<revision>.
func (r Repo) RefPath(revision string) string {
	return filepath.Join(r.Dir(), "refs", filepath.FromSlash(revision))
}

// LinkTarget is the relative symlink target from snapshots/<commit>/<file>
// to blobs/<etag>: "../../blobs/<etag>" with one more "../" per directory in
// file.
func LinkTarget(file, etag string) string {
	depth := strings.Count(path.Clean(file), "/")
	return strings.Repeat("../", 2+depth) + "blobs/" + etag
}

// HasBlob reports whether blobs/<etag> is a regular file of size bytes.
func (r Repo) HasBlob(etag string, size int64) bool {
	fi, err := os.Stat(r.BlobPath(etag))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == size
}

// Link points snapshots/<commit>/<file> at blobs/<etag> with a relative
// symlink, replacing whatever was there, atomically (a new link is renamed
// over the old path).
func (r Repo) Link(commit, file, etag string) error {
	dst := r.SnapshotPath(commit, file)
	target := LinkTarget(file, etag)
	if cur, err := os.Readlink(dst); err == nil && cur == target {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("hfcache: link %s: %w", dst, err)
	}
	// A random temporary name: a fixed one ("<file>.spool-link") can be the
	// name of another file of the repository, linked at the same time.
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".spool-link-"+hex.EncodeToString(rnd[:]))
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("hfcache: link %s -> %s: %w", dst, target, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hfcache: link %s -> %s: %w", dst, target, err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("hfcache: link %s -> %s: %w", dst, target, err)
	}
	return nil
}

// WriteRef records that revision points to commit, writing refs/<revision>
// atomically and durably (internal/atomicfile). huggingface_hub writes no ref
// when the revision is the commit itself; neither should callers.
func (r Repo) WriteRef(revision, commit string) error {
	p := r.RefPath(revision)
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == commit {
		return nil
	}
	if err := atomicfile.WriteFile(p, []byte(commit), 0o644); err != nil {
		return fmt.Errorf("hfcache: write ref %s: %w", revision, err)
	}
	return nil
}

// ResolveRevision returns the commit of revision: revision itself if it is
// 40 hex digits, else the contents of refs/<revision>.
func (r Repo) ResolveRevision(revision string) (string, error) {
	if isCommit(revision) {
		return strings.ToLower(revision), nil
	}
	b, err := os.ReadFile(r.RefPath(revision))
	if err != nil {
		return "", fmt.Errorf("hfcache: revision %q of %s: %w", revision, r.ID, err)
	}
	c := strings.TrimSpace(string(b))
	if !isCommit(c) {
		return "", fmt.Errorf("hfcache: refs/%s of %s holds %q, not a commit id", revision, r.ID, c)
	}
	return c, nil
}

// RemoveIfExists removes path, treating a missing file as success.
func RemoveIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func isCommit(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
