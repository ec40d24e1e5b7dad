package packed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spoolhq/spool/native/diskio"
)

// lockName is a model directory's lock file: engines that have the model
// open hold it shared, and whatever changes the model's files in place
// (Convert, Unpack, engine/pull) holds it exclusive, so that no raw byte
// is released under a running engine.
const lockName = ".spool-model.lock"

// ErrInUse is wrapped by Lock's error when the model is open elsewhere.
var ErrInUse = errors.New("the model is in use")

// Lock takes dir's exclusive lock, and sweeps the temporary files an
// earlier conversion killed midway left (a pack or record being written:
// atomicfile's .<name>.*.tmp). Call unlock when done.
func Lock(dir string) (unlock func() error, err error) {
	unlock, err = diskio.LockFile(filepath.Join(dir, lockName))
	switch {
	case errors.Is(err, diskio.ErrLocked):
		return nil, fmt.Errorf("packed: %w: %s is open in a running Spool, or another pack, unpack or pull works on it; stop it first", ErrInUse, dir)
	case errors.Is(err, errors.ErrUnsupported):
		unlock = func() error { return nil }
	case err != nil:
		return nil, fmt.Errorf("packed: %w", err)
	}
	sweep(dir)
	return unlock, nil
}

// Use takes the shared lock an engine holds while dir is open; it fails
// while a conversion runs. Where the directory cannot hold a lock file
// (read-only), nothing can convert it either, and Use takes nothing.
func Use(dir string) (unlock func() error, err error) {
	if filepath.Base(filepath.Dir(filepath.Clean(dir))) == "snapshots" {
		// A Hugging Face cache's snapshot: its files are links to blobs,
		// never released in place, and it keeps no file of ours.
		return func() error { return nil }, nil
	}
	unlock, err = diskio.LockFileShared(filepath.Join(dir, lockName))
	switch {
	case errors.Is(err, diskio.ErrLocked):
		return nil, fmt.Errorf("packed: %w: spool pack, unpack or pull is changing %s's files; wait for it to finish", ErrInUse, dir)
	case err != nil:
		return func() error { return nil }, nil
	}
	return unlock, nil
}

// sweep removes the temporary packs and records a killed conversion left
// in dir.
func sweep(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".tmp") {
			continue
		}
		if strings.Contains(n, ".safetensors.spoolpack.") || strings.HasPrefix(n, "."+RecordName+".") {
			os.Remove(filepath.Join(dir, n))
		}
	}
}
