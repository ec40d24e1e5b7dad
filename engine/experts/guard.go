package experts

import "github.com/spoolhq/spool/native/sysinfo"

// guardLocked samples the footprint and, above the limit, shrinks every
// layer's LRU by one unleased slot, freeing its slab.
func (s *Streamed) guardLocked() {
	sample := s.footprint
	if sample == nil {
		sample = func() (uint64, error) {
			f, err := sysinfo.Footprint()
			return f.Footprint, err
		}
	}
	fp, err := sample()
	if err != nil || fp <= uint64(s.opts.FootprintLimit) {
		return
	}
	for _, lc := range s.layers {
		sl := lc.victim()
		if sl == nil {
			continue
		}
		s.dropLRUSlotLocked(lc, sl)
		lc.cap = len(lc.slots)
		s.tel.shrinks++
	}
}
