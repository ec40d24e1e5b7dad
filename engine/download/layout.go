package download

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spoolhq/spool/engine/download/hfcache"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/internal/atomicfile"
)

// Layout is where a job puts the files it downloads: the Hugging Face
// cache (the default: content-addressed blobs and snapshot links, where
// other tools find them), or another tree such as a model directory of
// Spool's own store. A job writes a blob's bytes to its partial path, and
// once they are verified asks the layout to place it. Its methods are
// called from several goroutines, one blob at a time each.
type Layout interface {
	// Dir is the directory the files of commit appear in.
	Dir(commit string) string
	// PartialPath is where blob etag's bytes are written while it
	// downloads (its resume record sits beside it, with ".spool.json"
	// appended), LockPath the lock its writer holds.
	PartialPath(etag string) string
	LockPath(etag string) string
	// Complete reports whether file f is in place, verified.
	Complete(f hub.File) bool
	// Place makes the verified blob of f appear as every path given, at
	// commit: from partial, its verified bytes (which it moves), or,
	// when partial is "", from the blob already in place. It is durable
	// when it returns.
	Place(commit string, f hub.File, paths []string, partial string) error
	// Finish records that revision resolved to commit, once every file
	// is in place.
	Finish(revision, commit string) error
}

// HubCache is the Hugging Face cache layout of repo in the hub cache
// cacheDir (HF_HUB_CACHE): blobs/<etag>, snapshots/<commit>/<path> links
// to them, refs/<revision>.
func HubCache(cacheDir, repo string) Layout { return hubLayout{hfcache.New(cacheDir, repo)} }

type hubLayout struct{ r hfcache.Repo }

func (h hubLayout) Dir(commit string) string       { return h.r.SnapshotDir(commit) }
func (h hubLayout) PartialPath(etag string) string { return h.r.IncompletePath(etag) }
func (h hubLayout) LockPath(etag string) string    { return h.r.LockPath(etag) }
func (h hubLayout) Complete(f hub.File) bool       { return h.r.HasBlob(f.Etag(), f.Size) }

func (h hubLayout) Place(commit string, f hub.File, paths []string, partial string) error {
	if partial != "" {
		blob := h.r.BlobPath(f.Etag())
		if err := os.Rename(partial, blob); err != nil {
			return fmt.Errorf("publish %s: %w", paths[0], err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(blob)); err != nil {
			return fmt.Errorf("publish %s: %w", paths[0], err)
		}
	}
	for _, p := range paths {
		if err := h.r.Link(commit, p, f.Etag()); err != nil {
			return err
		}
	}
	return nil
}

func (h hubLayout) Finish(revision, commit string) error {
	if hub.IsCommit(revision) {
		return nil
	}
	return h.r.WriteRef(revision, commit)
}
