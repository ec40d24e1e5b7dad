package promptcache

import (
	"errors"
	"io/fs"
	"time"

	"github.com/spoolhq/spool/native/sysinfo"
)

// writer is the cache's one goroutine: it writes the blocks evicted from
// memory (first, in eviction order) and, once the cache has been idle for
// SpillIdle (or is flushing or closing), the blocks held only in memory,
// in the order they were stored; it also writes the recency of used files to
// their modification times. It exits when the cache closes with nothing
// left to write.
func (c *Cache) writer() {
	defer close(c.done)
	var buf []byte
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		e, times, wait, exit := c.nextJob(time.Now())
		c.mu.Unlock()
		switch {
		case e != nil:
			buf = c.writeEntry(e, buf)
			continue
		case times != nil:
			for path, t := range times {
				if err := c.opts.FS.Chtimes(path, t); err != nil && !errors.Is(err, fs.ErrNotExist) {
					c.log.Debug("prompt cache: cannot record a block's recency", "path", path, "err", err)
				}
			}
			continue
		case exit:
			return
		}
		timer.Reset(wait)
		select {
		case <-c.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// nextJob picks the writer's next job: an entry to write, recencies to
// record, or how long to sleep; exit once closing with nothing left. c.mu
// held.
func (c *Cache) nextJob(now time.Time) (e *memEntry, times map[string]time.Time, wait time.Duration, exit bool) {
	m := &c.mem
	paused := c.disk.paused(now)
	for len(m.backlog) > 0 {
		e = m.backlog[0]
		m.backlog[0] = nil
		m.backlog = m.backlog[1:]
		if paused {
			c.st.Dropped++
			c.release(e)
			continue
		}
		e.writing = true
		m.writing++
		return e, nil, 0, false
	}
	idleFor := now.Sub(c.active)
	idle := c.closing || m.flushing > 0 || idleFor >= c.opts.SpillIdle
	wait = time.Hour
	if m.unwritten.Len() > 0 {
		switch {
		case paused && c.closing:
			// The disk is full: what is only in memory is lost with it.
		case paused:
			wait = c.disk.pauseUntil.Sub(now)
		case idle:
			for el := m.unwritten.Front(); el != nil; el = el.Next() {
				if e := el.Value.(*memEntry); !e.writing {
					e.writing = true
					m.writing++
					return e, nil, 0, false
				}
			}
		default:
			wait = c.opts.SpillIdle - idleFor
		}
	}
	if idle {
		if times := c.disk.staleTimes(); times != nil {
			return nil, times, 0, false
		}
	} else if c.disk.stale > 0 {
		wait = min(wait, c.opts.SpillIdle-idleFor)
	}
	return nil, nil, max(wait, time.Millisecond), c.closing
}

// writeEntry writes one entry's block to disk (unless the disk has it
// already, with its MTP state) and settles the entry.
func (c *Cache) writeEntry(e *memEntry, buf []byte) []byte {
	b := e.b
	c.mu.Lock()
	var victims []string
	f := c.diskFile(b.hash)
	ok, skip := true, f != nil && (f.mtp || !b.mtp)
	size := fileSize(len(b.tokens), len(b.data), len(b.hidden))
	if !skip {
		victims, ok = c.disk.reserve(size)
		c.st.Disk.Evictions += int64(len(victims))
	}
	c.mu.Unlock()
	for _, p := range victims {
		c.disk.removeFile(p)
	}
	var err error
	var path string
	if !skip && ok {
		buf = encodeBlock(buf[:0], c.root, b)
		path, err = c.disk.writeFile(b.hash, buf, e.used)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case skip:
	case !ok:
		c.st.DiskFull++
		c.diskTrouble(errNoRoom)
	case err != nil:
		c.disk.used -= allocSize(size)
		c.st.WriteErrors++
		if sysinfo.IsDiskFull(err) {
			c.st.DiskFull++
		}
		c.diskTrouble(err)
	default:
		c.commit(b, path, size, e.used)
	}
	e.writing = false
	c.mem.writing--
	if e.elem != nil && e.dirty {
		// Written, or given up on: a block that cannot be written is not
		// tried again until it is stored again.
		e.dirty = false
		c.mem.written(e)
	}
	if e.spilled {
		if !ok || err != nil {
			c.st.Dropped++
		}
		c.release(e)
	}
	c.changed.Broadcast()
	return buf
}

// commit counts a block file just written; c.mu held (size was reserved).
func (c *Cache) commit(b *block, path string, size int64, used time.Time) {
	d := c.disk
	if old := d.files[b.hash]; old != nil {
		d.drop(old) // renamed over
	}
	f := &diskFile{hash: b.hash, path: path, size: size, alloc: allocSize(size), mtp: b.mtp, own: true, mtime: used}
	d.used -= f.alloc // count adds it back
	d.count(f, +1)
	d.place(f, nil)
	c.st.Disk.WrittenBytes += size
	if d.failing {
		d.failing = false
		c.log.Info("prompt cache: block writes work again", "dir", d.root)
	}
}

// errNoRoom reports a block that did not fit the disk tier.
var errNoRoom = errors.New("no room for the block within the disk tier's cap and the free space it leaves on the volume")

// diskTrouble logs the first of a run of failed writes and, for a full
// disk, pauses writes for a while; c.mu held.
func (c *Cache) diskTrouble(err error) {
	d := c.disk
	if sysinfo.IsDiskFull(err) || errors.Is(err, errNoRoom) {
		d.pauseUntil = time.Now().Add(fullBackoff)
	}
	if !d.failing {
		d.failing = true
		c.log.Warn("prompt cache: cannot write a block to disk; the block is lost to the disk tier, nothing else", "dir", d.root, "err", err)
	}
}
