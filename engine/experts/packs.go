package experts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spoolhq/spool/engine/container"
	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/native/diskio"
)

// openPack is a shard's pack, open for reads.
type openPack struct {
	file  int // index into Streamed.files
	path  string
	index *expertpack.Index
}

// openPacks opens the pack beside every shard that has one, as the
// options' PackPolicy says. A pack that is stale or does not parse is not
// used: a note says why, and those experts are read raw.
func (s *Streamed) openPacks(c *container.Container) (map[string]*openPack, error) {
	packs := map[string]*openPack{}
	if s.opts.Packs == PacksIgnore {
		return packs, nil
	}
	for _, sh := range c.Shards() {
		path := expertpack.PackPath(filepath.Join(c.Dir(), sh.Name))
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if l := s.opts.DecodeLoop; s.opts.Packs == PacksAuto && !l.Fast() {
			s.packNotes = append(s.packNotes, fmt.Sprintf("%s not used (its experts are read from the shard): "+
				"this machine's decode loop (%s) is slower than the disk, and packed reads cost more than they save", path, l))
			continue
		}
		x, err := expertpack.ReadIndex(path)
		if err == nil {
			err = x.Check(c.Dir())
		}
		if err != nil {
			s.packNotes = append(s.packNotes, fmt.Sprintf("%s not used (its experts are read from the shard): %v", path, err))
			continue
		}
		if len(x.Entries) == 0 {
			continue // the shard was packed and nothing gained
		}
		open := diskio.OpenDirect
		if s.opts.Buffered {
			open = diskio.OpenBuffered
		}
		f, err := open(path)
		if err != nil {
			return nil, fmt.Errorf("experts: %w", err)
		}
		s.files = append(s.files, f)
		packs[sh.Name] = &openPack{file: len(s.files) - 1, path: path, index: x}
	}
	return packs, nil
}

// PackNotes says which packs beside the shards were not used, and why.
func (s *Streamed) PackNotes() []string { return append([]string(nil), s.packNotes...) }
