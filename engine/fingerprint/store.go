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

// storeVersion is the store's format; a store of another is rebuilt,
// its files read again. Version 2 added the regions' checksums: a store
// of version 1 has none, so its files are hashed again rather than taken
// to have no expert to check.
const storeVersion = 2

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
	// Regions names the byte ranges whose checksums CRC32C holds
	// (regionSet.digest), and their count; "" when none were asked for.
	Regions     string `json:"regions,omitempty"`
	RegionCount int    `json:"region_count,omitempty"`
	CRC32C      string `json:"crc32c,omitempty"`
}

// loadStore reads the store at path; a missing one is empty, and one that
// cannot be read is logged and taken as empty (it is rebuilt when written).
func loadStore(path string, log *slog.Logger) *store {
	s := &store{Version: storeVersion, Files: map[string]entry{}}
	if path == "" {
		return s
	}
	atomicfile.Sweep(path) // the leftovers of saves a kill cut short
	read, err := readStore(path)
	var old *versionError
	switch {
	case errors.As(err, &old) && old.version < storeVersion:
		log.Info("fingerprint: the store of weight digests is of an older format; the weights are read again once", "store", path, "version", old.version)
		return s
	case err != nil:
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
		return nil, &versionError{path, s.Version}
	}
	if s.Files == nil {
		s.Files = map[string]entry{}
	}
	return &s, nil
}

// versionError is a store of another format.
type versionError struct {
	path    string
	version int
}

func (e *versionError) Error() string {
	return fmt.Sprintf("%s: format version %d, this build reads %d", e.path, e.version, storeVersion)
}

// lookup returns the digest remembered for path under stamp, and the
// checksums of regions (nil: none asked for) remembered with it.
func (s *store) lookup(path string, stamp diskio.Stamp, regions *regionSet) (Hash, []uint32, bool) {
	e, ok := s.Files[path]
	if !ok || e.Stamp != stamp {
		return Hash{}, nil, false
	}
	var h Hash
	if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != len(h) {
		return Hash{}, nil, false
	} else {
		copy(h[:], b)
	}
	if regions == nil {
		return h, nil, true
	}
	if e.Regions != regions.digest() || e.RegionCount != len(regions.given) {
		return Hash{}, nil, false
	}
	sums, err := decodeSums(e.CRC32C, len(regions.given))
	if err != nil {
		return Hash{}, nil, false
	}
	return h, sums, true
}

// saveStore adds the digests of files[pending] (and their regions'
// checksums) to the store at path as it is now on disk (another process
// may have added to it), drops the entries of files gone or changed, and
// writes it atomically.
func saveStore(path string, files []File, regions []*regionSet, pending []int, stamps []diskio.Stamp, log *slog.Logger) error {
	s := loadStore(path, log)
	for p, e := range s.Files {
		if fi, err := os.Stat(p); err != nil || diskio.StampOf(fi) != e.Stamp {
			delete(s.Files, p)
		}
	}
	for _, i := range pending {
		e := entry{Stamp: stamps[i], SHA256: files[i].SHA256.String()}
		if r := regions[i]; r != nil {
			e.Regions, e.RegionCount, e.CRC32C = r.digest(), len(r.given), encodeSums(files[i].CRC32C)
		}
		s.Files[files[i].Path] = e
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o644)
}
