package experts

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

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
		s.names = append(s.names, sh.Name+expertpack.Suffix)
		packs[sh.Name] = &openPack{file: len(s.files) - 1, path: path, index: x}
	}
	return packs, nil
}

// PackNotes says which packs beside the shards were not used, and why,
// and which held damaged records.
func (s *Streamed) PackNotes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.packNotes...)
	paths := make([]string, 0, len(s.damaged))
	for p := range s.damaged {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		out = append(out, fmt.Sprintf("%s has %d damaged records (their experts are read from the shard): run spool pack again", p, s.damaged[p]))
	}
	return out
}

// unpackedLocked is the layout a packed read's slab holds once its record
// is final. After a damaged record was read from the shard instead, the
// expert's layout becomes its raw one, so that it is not read from the
// pack again, and the fallback is logged and noted.
func (s *Streamed) unpackedLocked(lc *layerCache, id int, u *unpackState) *layout {
	if !u.fellBack {
		return u.lo
	}
	raw := u.lo.packed.raw
	if lc.layouts[id] == u.lo {
		lc.layouts[id] = raw
		if s.damaged == nil {
			s.damaged = map[string]int{}
		}
		s.damaged[u.lo.packed.path]++
		s.logger().Warn("experts: a packed expert is damaged; read from the shard instead (run spool pack again)",
			"pack", u.lo.packed.path, "layer", lc.layer, "expert", id, "err", u.damaged)
	}
	return raw
}

func (s *Streamed) logger() *slog.Logger {
	if s.opts.Logger != nil {
		return s.opts.Logger
	}
	return slog.Default()
}
