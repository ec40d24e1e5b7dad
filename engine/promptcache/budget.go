package promptcache

import (
	"context"
	"fmt"
	"math"
)

// SetMemoryShare sets the memory tier's cap to a share, from 0 to 1, of the
// planned one (Options.MemoryBytes): under memory pressure the tier gives
// way and grows back when the pressure ends. Shrinking evicts the least
// recently used blocks at once; blocks the disk tier lacks go to the
// writer's backlog as on any eviction (or are dropped when the backlog is
// full), so a later request restores them from disk or computes them. It
// returns the cap now in force.
func (c *Cache) SetMemoryShare(share float64) (int64, error) {
	if math.IsNaN(share) || share < 0 || share > 1 {
		return 0, fmt.Errorf("promptcache: memory share %v is not between 0 and 1", share)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.mem
	m.max = int64(math.Floor(float64(c.opts.MemoryBytes) * share))
	for m.used > m.max {
		back := m.lru.Back()
		if back == nil {
			break
		}
		e := back.Value.(*memEntry)
		if !c.evict(context.Background(), e, false) {
			// The backlog is full: the block is lost to the disk tier.
			e.dirty = false
			c.st.Dropped++
			c.evict(context.Background(), e, false)
		}
	}
	return m.max, nil
}
