package pull

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spoolhq/spool/engine/download/hfcache"
	"github.com/spoolhq/spool/engine/download/hub"
	"github.com/spoolhq/spool/engine/packed"
	"github.com/spoolhq/spool/internal/atomicfile"
)

// Snapshot names the repository and commit of a Hugging Face cache
// snapshot directory (<cache>/models--owner--name/snapshots/<commit>), and
// reports whether dir is one.
func Snapshot(dir string) (cacheDir, repo, commit string, ok bool) {
	clean, err := filepath.Abs(filepath.Clean(dir))
	if err != nil {
		return "", "", "", false
	}
	snaps := filepath.Dir(clean)
	folder := filepath.Dir(snaps)
	name, isRepo := strings.CutPrefix(filepath.Base(folder), "models--")
	if filepath.Base(snaps) != "snapshots" || !isRepo || !hub.IsCommit(filepath.Base(clean)) {
		return "", "", "", false
	}
	owner, model, found := strings.Cut(name, "--")
	if !found {
		return "", "", "", false
	}
	return filepath.Dir(folder), owner + "/" + model, filepath.Base(clean), true
}

// Adopt brings the Hugging Face cache snapshot in snapshotDir into the
// store, to be packed there: with keepOriginal the store's directory
// links to the snapshot's files (other tools keep reading them; the packs
// go beside the links), else every file moves into the store (renamed
// where the volume is the same, else copied) and leaves the cache — its
// snapshot links, the blobs no other snapshot shares, the refs naming the
// commit — since its bytes will no longer match their names. It writes the
// model's record, and resumes after a kill. It returns the store's model
// directory.
func Adopt(snapshotDir, store string, keepOriginal bool) (string, error) {
	cacheDir, repo, commit, ok := Snapshot(snapshotDir)
	if !ok {
		return "", fmt.Errorf("pull: %s is not a Hugging Face cache snapshot (models--owner--name/snapshots/<commit>)", snapshotDir)
	}
	if store == "" {
		store = DefaultStore()
	}
	cache := hfcache.New(cacheDir, repo)
	dir := ModelDir(store, repo, commit)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("pull: %w", err)
	}
	rec, err := packed.ReadRecord(dir)
	if err != nil {
		return "", err
	}
	if rec == nil {
		rec = &packed.Record{Origin: &packed.Origin{Repo: repo, Commit: commit}, KeepOriginal: keepOriginal}
	} else if rec.KeepOriginal != keepOriginal {
		return "", fmt.Errorf("pull: %s was brought into the store %s the original files; do it the same way", dir,
			map[bool]string{true: "keeping", false: "without keeping"}[rec.KeepOriginal])
	}
	snap := cache.SnapshotDir(commit)
	var paths []string
	err = filepath.WalkDir(snap, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(snap, p)
		if err == nil {
			paths = append(paths, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("pull: %w", err)
	}
	shared := sharedBlobs(cache, commit)
	for _, p := range paths {
		src := cache.SnapshotPath(commit, p)
		dst := filepath.Join(dir, filepath.FromSlash(p))
		blob, err := filepath.EvalSymlinks(src)
		if err != nil {
			return "", fmt.Errorf("pull: %s: %w", src, err)
		}
		fi, err := os.Stat(blob)
		if err != nil {
			return "", fmt.Errorf("pull: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", fmt.Errorf("pull: %w", err)
		}
		etag := filepath.Base(blob)
		if keepOriginal {
			if err := relink(src, dst); err != nil {
				return "", err
			}
		} else if err := moveOut(blob, dst, shared[etag]); err != nil {
			return "", err
		}
		f, found := rec.File(p)
		if !found {
			rec.Files = append(rec.Files, packed.File{Name: p, Shard: strings.HasSuffix(p, ".safetensors")})
			f = &rec.Files[len(rec.Files)-1]
		}
		f.Size, f.Etag, f.Stage = fi.Size(), etag, packed.Present
		if len(etag) == 64 {
			f.SHA256 = etag // an LFS blob is named by its SHA-256
		}
		if err := rec.Write(dir); err != nil {
			return "", err
		}
		if !keepOriginal {
			// The file is the store's now: the cache's link goes.
			if err := os.Remove(src); err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", fmt.Errorf("pull: %w", err)
			}
		}
	}
	if !keepOriginal {
		dropSnapshot(cache, commit)
	}
	return dir, nil
}

// sharedBlobs lists the blobs other snapshots of the repository link to.
func sharedBlobs(cache hfcache.Repo, commit string) map[string]bool {
	out := map[string]bool{}
	snaps, _ := os.ReadDir(filepath.Dir(cache.SnapshotDir(commit)))
	for _, s := range snaps {
		if s.Name() == commit {
			continue
		}
		filepath.WalkDir(cache.SnapshotDir(s.Name()), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if blob, err := filepath.EvalSymlinks(p); err == nil {
					out[filepath.Base(blob)] = true
				}
			}
			return nil
		})
	}
	return out
}

// moveOut moves a blob into the store as dst (renamed where the volume is
// the same, else copied and, unless another snapshot shares it, removed);
// a dst already there with the blob's size was moved before.
func moveOut(blob, dst string, shared bool) error {
	bi, err := os.Stat(blob)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	if di, err := os.Lstat(dst); err == nil && di.Mode().IsRegular() && di.Size() == bi.Size() {
		return nil
	}
	if !shared && os.Rename(blob, dst) == nil {
		return atomicfile.SyncDir(filepath.Dir(dst))
	}
	in, err := os.Open(blob)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	defer in.Close()
	if err := atomicfile.WriteFrom(dst, in, 0o644); err != nil {
		return fmt.Errorf("pull: copying %s into the store: %w", blob, err)
	}
	if !shared {
		if err := os.Remove(blob); err != nil {
			return fmt.Errorf("pull: %w", err)
		}
	}
	return nil
}

// relink points dst at the snapshot's file src.
func relink(src, dst string) error {
	if cur, err := os.Readlink(dst); err == nil && cur == src {
		return nil
	}
	tmp := dst + ".spool-link"
	os.Remove(tmp)
	if err := os.Symlink(src, tmp); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	return nil
}

// dropSnapshot removes what is left of a snapshot moved out of the cache:
// its empty directories and the refs naming its commit.
func dropSnapshot(cache hfcache.Repo, commit string) {
	snap := cache.SnapshotDir(commit)
	// Deepest first.
	var dirs []string
	filepath.WalkDir(snap, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i]) // only when empty
	}
	refs := filepath.Join(cache.Dir(), "refs")
	filepath.WalkDir(refs, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == commit {
				os.Remove(p)
			}
		}
		return nil
	})
}
