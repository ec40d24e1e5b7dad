package experts

import (
	"errors"

	"github.com/spoolhq/spool/native/offheap"
)

// Close stops the read pool, saves the usage history and frees every
// slab. Leases must have been released.
func (s *Streamed) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancelAllAheadLocked()
	s.mu.Unlock()
	var errs []error
	if s.pool != nil {
		errs = append(errs, s.pool.Close())
	}
	s.bgSubmit.Wait()
	s.repairs.Wait()
	if s.opts.UsagePath != "" && s.usage != nil && s.usage.Total() > 0 {
		errs = append(errs, s.usage.Save(s.opts.UsagePath))
	}
	free := func(sl *slot) {
		if sl.slab != nil {
			errs = append(errs, offheap.Free(sl.slab))
			sl.slab = nil
		}
	}
	for _, cl := range s.classes {
		for _, sl := range cl.free {
			free(sl)
		}
	}
	for _, lc := range s.layers {
		for _, sl := range lc.slots {
			free(sl)
		}
		for _, sl := range lc.pinned {
			free(sl)
		}
		for _, sl := range lc.spare {
			free(sl)
		}
	}
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
