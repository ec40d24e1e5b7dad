package fingerprint

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/spoolhq/spool/internal/atomicfile"
	"github.com/spoolhq/spool/internal/regularfile"
	"github.com/spoolhq/spool/native/diskio"
)

// storeVersion is the store's format; a store of another is rebuilt.
const storeVersion = 1

// maxStore bounds the store read: an entry is a path and a few numbers,
// so this is tens of thousands of files.
const maxStore = 16 << 20

// store is the remembered digests, by absolute path.
type store struct {
	Version int              `json:"version"`
	Files   map[string]entry `json:"files"`
}

type entry struct {
	diskio.Stamp
	SHA256 string `json:"sha256"`
}

// loadStore reads the store at path; a missing one is empty, and one that
// cannot be read is logged and taken as empty (it is rebuilt when written).
func loadStore(path string, log *slog.Logger) *store {
	s := &store{Version: storeVersion, Files: map[string]entry{}}
	if path == "" {
		return s
	}
	read, err := readStore(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Warn("fingerprint: the store of weight digests cannot be read; it will be rebuilt", "store", path, "err", err)
		}
		return s
	}
	return read
}

func readStore(path string) (*store, error) {
	data, err := regularfile.Read(path, maxStore)
	if err != nil {
		return nil, err
	}
	var s store
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Version != storeVersion {
		return nil, fmt.Errorf("%s: format version %d, this build reads %d", path, s.Version, storeVersion)
	}
	if s.Files == nil {
		s.Files = map[string]entry{}
	}
	return &s, nil
}

// lookup returns the digest remembered for path under stamp.
func (s *store) lookup(path string, stamp diskio.Stamp) (Hash, bool) {
	e, ok := s.Files[path]
	if !ok || e.Stamp != stamp {
		return Hash{}, false
	}
	var h Hash
	if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != len(h) {
		return Hash{}, false
	} else {
		copy(h[:], b)
	}
	return h, true
}

// saveStore adds the digests of files[pending] to the store at path as it is
// now on disk (another process may have added to it), drops the entries
// of files gone or changed, and writes it atomically.
func saveStore(path string, files []File, pending []int, stamps []diskio.Stamp, log *slog.Logger) error {
	s := loadStore(path, log)
	for p, e := range s.Files {
		if fi, err := os.Stat(p); err != nil || diskio.StampOf(fi) != e.Stamp {
			delete(s.Files, p)
		}
	}
	for _, i := range pending {
		s.Files[files[i].Path] = entry{Stamp: stamps[i], SHA256: files[i].SHA256.String()}
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o644)
}
