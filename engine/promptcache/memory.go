package promptcache

import (
	"container/list"
	"context"
	"time"
)

// memEntry is a block held in memory: resident (in the LRU), or evicted
// and waiting in the backlog to be written to disk.
type memEntry struct {
	b       *block
	elem    *list.Element // its LRU element while resident, else nil
	dirty   bool          // the disk tier does not have it (with its MTP rows)
	unwrit  *list.Element // its element in memTier.unwritten while resident and dirty
	writing bool          // the writer is writing it
	spilled bool          // evicted: held until the writer has written it
	op      uint64        // the chain operation that placed it last
	used    time.Time     // its recency (see recency)
}

// memTier is the memory tier's state; the Cache's mutex guards it.
type memTier struct {
	max, used int64
	lru       list.List // of *memEntry, most recently used first
	blocks    map[Hash]*memEntry
	// backlog holds evicted dirty blocks in eviction order; spilling finds
	// them (and the evicted blocks being written) by hash.
	backlog      []*memEntry
	spilling     map[Hash]*memEntry
	backlogBytes int64
	backlogMax   int64

	unwritten list.List // resident dirty entries, oldest first (the idle writer's queue)
	writing   int       // entries the writer holds
	flushing  int       // Flush calls waiting
}

func newMemTier(max, backlogMax int64) memTier {
	return memTier{max: max, backlogMax: backlogMax, blocks: map[Hash]*memEntry{}, spilling: map[Hash]*memEntry{}}
}

// find returns the block of hash h held in memory, resident or spilling.
func (m *memTier) find(h Hash) *block {
	if e := m.blocks[h]; e != nil {
		return e.b
	}
	if e := m.spilling[h]; e != nil {
		return e.b
	}
	return nil
}

func (m *memTier) clear() {
	*m = newMemTier(m.max, m.backlogMax)
}

// recency is the time a chain operation at t gives the block at depth k:
// a microsecond older per block, so that among the blocks of one prefix the
// deepest are evicted first (the head is what the next request needs).
func recency(t time.Time, k int) time.Time { return t.Add(-time.Duration(k) * time.Microsecond) }

// place makes e resident right after anchor (at the front when anchor is
// nil or no longer resident); c.mu held.
func (c *Cache) place(e *memEntry, anchor *memEntry) {
	m := &c.mem
	switch {
	case e.elem != nil && anchor != nil && anchor.elem != nil:
		m.lru.MoveAfter(e.elem, anchor.elem)
	case e.elem != nil:
		m.lru.MoveToFront(e.elem)
	case anchor != nil && anchor.elem != nil:
		e.elem = m.lru.InsertAfter(e, anchor.elem)
	default:
		e.elem = m.lru.PushFront(e)
	}
}

// admit makes b resident after anchor as part of chain operation op,
// evicting the least recently used blocks of other operations to make
// room. A block that cannot be resident without evicting blocks of its own
// operation (they come before it in the prefix) goes straight to the
// backlog when it is dirty. With wait false admit never waits for the
// backlog and leaves b out instead. It returns the resident entry or nil;
// c.mu held (released while waiting).
func (c *Cache) admit(ctx context.Context, b *block, dirty bool, op uint64, used time.Time, anchor *memEntry, wait bool) *memEntry {
	m := &c.mem
	size := b.memBytes()
	for m.used+size > m.max {
		back := m.lru.Back()
		if back == nil || back.Value.(*memEntry).op == op {
			if dirty {
				c.spill(ctx, &memEntry{b: b, dirty: true, used: used}, wait)
			}
			return nil
		}
		if !c.evict(ctx, back.Value.(*memEntry), wait) && !wait {
			return nil
		}
	}
	e := &memEntry{b: b, dirty: dirty, op: op, used: used}
	c.place(e, anchor)
	m.blocks[b.hash] = e
	m.used += size
	if dirty {
		e.unwrit = m.unwritten.PushBack(e)
	}
	return e
}

// written takes a resident entry off the idle writer's queue.
func (m *memTier) written(e *memEntry) {
	if e.unwrit != nil {
		m.unwritten.Remove(e.unwrit)
		e.unwrit = nil
	}
}

// evict removes e from residence. A dirty block moves to the backlog for
// the writer; when the backlog is full evict waits for room (with wait, and
// until ctx ends or the cache closes, after which the block is dropped) and
// reports false without evicting, so the caller looks again. c.mu held.
func (c *Cache) evict(ctx context.Context, e *memEntry, wait bool) bool {
	m := &c.mem
	size := e.b.memBytes()
	spill := e.dirty && c.disk != nil && !c.disk.paused(time.Now())
	if spill && !e.writing && m.backlogBytes > 0 && m.backlogBytes+size > m.backlogMax {
		if !wait {
			return false
		}
		if ctx.Err() == nil && !c.closing {
			c.changed.Wait()
			return false
		}
		spill = false
	}
	m.lru.Remove(e.elem)
	e.elem = nil
	delete(m.blocks, e.b.hash)
	m.used -= size
	c.st.Memory.Evictions++
	m.written(e) // no longer resident; a dirty one spills below
	switch {
	case spill:
		m.spilling[e.b.hash] = e
		m.backlogBytes += size
		e.spilled = true
		if !e.writing {
			m.backlog = append(m.backlog, e)
			c.signal()
		}
	case e.dirty:
		c.st.Dropped++
	}
	return true
}

// spill queues a block that is not resident for the writer, waiting for
// backlog room as evict does; c.mu held.
func (c *Cache) spill(ctx context.Context, e *memEntry, wait bool) {
	m := &c.mem
	size := e.b.memBytes()
	for {
		if c.disk == nil || c.disk.paused(time.Now()) || c.closing || ctx.Err() != nil {
			c.st.Dropped++
			return
		}
		if m.backlogBytes == 0 || m.backlogBytes+size <= m.backlogMax {
			break // an empty backlog takes any block
		}
		if !wait {
			c.st.Dropped++
			return
		}
		c.changed.Wait()
	}
	e.spilled = true
	m.spilling[e.b.hash] = e
	m.backlog = append(m.backlog, e)
	m.backlogBytes += size
	c.signal()
}

// release drops an entry that left the backlog or was evicted while being
// written; c.mu held.
func (c *Cache) release(e *memEntry) {
	m := &c.mem
	if !e.spilled {
		return
	}
	e.spilled = false
	if m.spilling[e.b.hash] == e {
		delete(m.spilling, e.b.hash)
	}
	m.backlogBytes -= e.b.memBytes()
	c.changed.Broadcast()
}

// replace drops the resident or spilling entry of b's hash ahead of an
// upgraded copy (one with MTP rows); c.mu held.
func (c *Cache) replace(h Hash) {
	m := &c.mem
	if e := m.blocks[h]; e != nil {
		m.lru.Remove(e.elem)
		e.elem = nil
		delete(m.blocks, h)
		m.used -= e.b.memBytes()
		m.written(e)
		e.dirty = false
	}
}
