package promptcache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/native/diskio"
	"github.com/spoolhq/spool/native/offheap"
)

// Match is what Lookup found: the longest run of cached blocks that begins
// the prompt.
type Match struct {
	// Tokens is how many leading prompt tokens the cached blocks cover: a
	// multiple of the block size, at most len(prompt)-1 so that at least
	// one token is left to forward (its logits give the next token).
	Tokens int
	// Memory and Disk split Tokens by the tier holding each block at the
	// time of the lookup.
	Memory, Disk int

	prompt []int
	hashes []Hash
}

// Lookup finds the longest cached prefix of prompt. It reads nothing from
// disk; Restore does, and may restore less when blocks went away or turn
// out damaged in between.
func (c *Cache) Lookup(prompt []int) Match {
	usable := max(len(prompt)-1, 0)
	hashes := chainHashes(c.root, prompt[:usable], c.bt)
	c.mu.Lock()
	defer c.mu.Unlock()
	var m Match
	if c.closing {
		return m
	}
	c.st.Lookups++
	c.touchActive()
	found := 0
	for _, h := range hashes {
		if c.mem.find(h) != nil {
			m.Memory += c.bt
		} else if c.diskFile(h) != nil {
			m.Disk += c.bt
		} else {
			break
		}
		found++
	}
	m.hashes = hashes[:found]
	m.Tokens = found * c.bt
	m.prompt = slices.Clone(prompt[:m.Tokens])
	return m
}

// Restored reports what Restore did.
type Restored struct {
	// Tokens is the prompt prefix the sequence holds now; Added the tokens
	// this call restored, FromMemory and FromDisk their split by tier.
	Tokens, Added        int
	FromMemory, FromDisk int
	// MTP reports that the sequence's MTP cache continues to its main
	// cache's end (its last row is position Tokens-2) and Hidden is the
	// final-normed hidden state of position Tokens-1: the MTP layer's next
	// row consumes Hidden with the token at position Tokens.
	MTP    bool
	Hidden []float32
	// ReadBytes is what the direct reads of block files requested.
	ReadBytes int64
	Elapsed   time.Duration
}

// source is where one block of a restore comes from.
type source struct {
	k      int
	parent Hash
	b      *block    // in memory
	file   *diskFile // else on disk
	path   string
	size   int64
}

// Restore imports the blocks of m into seq, which must be empty or hold a
// prefix of the prompt (its tokens are kept; the blocks continue them). It
// stops early, keeping what it restored, at a block that is gone or that
// does not verify (such a file is deleted and logged). The error is for
// invalid arguments and for ctx ending, after which seq is back to its
// length on entry.
func (c *Cache) Restore(ctx context.Context, seq *kvcache.Sequence, m Match) (Restored, error) {
	start := time.Now()
	if !sameGeometry(seq.Geometry(), c.geo) {
		return Restored{}, errors.New("promptcache: restore into a sequence of another geometry")
	}
	held := seq.Tokens()
	if n := min(len(held), len(m.prompt)); !slices.Equal(held[:n], m.prompt[:n]) {
		return Restored{}, errors.New("promptcache: restore into a sequence holding other tokens than the prompt (trim it to the common prefix first)")
	}
	r := Restored{Tokens: seq.Len()}
	first := seq.Len() / c.bt
	if first >= len(m.hashes) {
		return r, nil
	}
	n0, mark := seq.Len(), seq.Mark()

	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return r, nil
	}
	c.touchActive()
	var srcs []source
	for k := first; k < len(m.hashes); k++ {
		h := m.hashes[k]
		if b := c.mem.find(h); b != nil {
			srcs = append(srcs, source{k: k, parent: c.parent(m.hashes, k), b: b})
		} else if f := c.diskFile(h); f != nil {
			srcs = append(srcs, source{k: k, parent: c.parent(m.hashes, k), file: f, path: f.path, size: f.size})
		} else {
			break
		}
	}
	c.mu.Unlock()

	rd := &restoreReads{c: c, ctx: ctx, srcs: srcs}
	defer rd.close()
	var used []source
	var last *block
	cancelled := func(err error) (Restored, error) {
		seq.Rollback(mark)
		return Restored{}, fmt.Errorf("promptcache: restore: %w", err)
	}
	for i := range srcs {
		if err := ctx.Err(); err != nil {
			return cancelled(err)
		}
		s := &srcs[i]
		b := s.b
		if b == nil {
			var bytes int64
			var err error
			b, bytes, err = rd.get(i)
			r.ReadBytes += bytes
			if err != nil {
				if ctx.Err() != nil {
					return cancelled(ctx.Err())
				}
				break
			}
			s.b = b
		}
		if b.start != s.k*c.bt || !slices.Equal(b.tokens, m.prompt[b.start:b.start+c.bt]) {
			break // a hash collision: never seen, never trusted
		}
		if _, err := seq.ImportBlock(b.start, b.tokens, b.data, b.mtp); err != nil {
			c.log.Warn("prompt cache: cannot import a block", "err", err)
			break
		}
		added := b.start + c.bt - max(n0, b.start)
		if s.file != nil {
			r.FromDisk += added
		} else {
			r.FromMemory += added
		}
		used = append(used, *s)
		last = b
	}
	r.Tokens = seq.Len()
	r.Added = r.Tokens - n0
	if last != nil && last.mtp && seq.Geometry().MTP && seq.MTPEnd() == r.Tokens-1 {
		r.MTP = true
		r.Hidden = slices.Clone(last.hidden)
	}
	r.Elapsed = time.Since(start)
	c.settle(ctx, used, r)
	return r, nil
}

// settle records a restore: the blocks used become the most recent, blocks
// read from disk join the memory tier when it has room without waiting,
// and the counters grow.
func (c *Cache) settle(ctx context.Context, used []source, r Restored) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Added > 0 {
		c.st.Hits++
		c.st.HitTokens += int64(r.Added)
	}
	c.st.Memory.HitTokens += int64(r.FromMemory)
	c.st.Disk.HitTokens += int64(r.FromDisk)
	c.st.Disk.ReadBytes += r.ReadBytes
	if c.closing || len(used) == 0 {
		return
	}
	c.op++
	op, now := c.op, time.Now()
	var anchor *memEntry
	var diskHint *diskFile
	for _, s := range used {
		t := recency(now, s.k)
		if s.file == nil {
			c.st.Memory.ReadBytes += 4 * int64(len(s.b.data)+len(s.b.hidden))
		}
		if e := c.mem.blocks[s.b.hash]; e != nil {
			e.op, e.used = op, t
			c.place(e, anchor)
			anchor = e
		} else if s.file != nil && c.mem.find(s.b.hash) == nil {
			if e := c.admit(ctx, s.b, false, op, t, anchor, false); e != nil {
				anchor = e
			}
		}
		if f := c.diskFile(s.b.hash); f != nil {
			c.disk.touch(f, t, diskHint)
			diskHint = f
		}
	}
	c.signal()
}

// errReplaced reports a block file rewritten between the lookup and the
// read: the restore ends there, as for a file evicted meanwhile.
var errReplaced = errors.New("promptcache: the block file was replaced")

// restoreReads reads the disk blocks of a restore, up to readAhead files
// at once through the cache's read pool.
type restoreReads struct {
	c        *Cache
	ctx      context.Context
	srcs     []source
	inflight []*fileRead // in source order
	next     int         // the next source to consider for reading
}

type fileRead struct {
	i    int
	held bool // it holds one of the cache's slab tokens
	slab []byte
	file *diskio.DirectFile
	res  <-chan diskio.ReadResult
	err  error
}

// get returns the block of disk source i, starting reads ahead of it.
func (rd *restoreReads) get(i int) (*block, int64, error) {
	rd.startReads(i)
	if len(rd.inflight) == 0 || rd.inflight[0].i != i {
		return nil, 0, errors.New("promptcache: no read slab") // not reached: startReads always starts i
	}
	fr := rd.inflight[0]
	rd.inflight = rd.inflight[1:]
	defer rd.finish(fr)
	s := rd.srcs[i]
	if fr.err != nil {
		return nil, 0, rd.failed(s, fr.err)
	}
	var res diskio.ReadResult
	select {
	case res = <-fr.res:
	case <-rd.ctx.Done():
		res = <-fr.res // the pool answers every request; ours stops at its next chunk
	}
	if res.Err != nil {
		return nil, res.Bytes, rd.failed(s, res.Err)
	}
	b, err := rd.c.verify(s, res.Data)
	return b, res.Bytes, err
}

// startReads starts reads of disk sources from i on while slabs are free;
// it waits for a slab only when nothing is in flight.
func (rd *restoreReads) startReads(i int) {
	rd.next = max(rd.next, i)
	for ; rd.next < len(rd.srcs) && len(rd.inflight) < readAhead; rd.next++ {
		s := rd.srcs[rd.next]
		if s.b != nil {
			continue
		}
		var slab []byte
		select {
		case slab = <-rd.c.slabs:
		default:
			if len(rd.inflight) > 0 {
				return
			}
			select {
			case slab = <-rd.c.slabs:
			case <-rd.ctx.Done():
				rd.inflight = append(rd.inflight, &fileRead{i: rd.next, err: rd.ctx.Err()})
				rd.next++
				return
			}
		}
		fr := rd.c.startRead(rd.ctx, rd.next, s, slab)
		rd.inflight = append(rd.inflight, fr)
	}
}

// startRead opens the file of s and submits its read.
func (c *Cache) startRead(ctx context.Context, i int, s source, slab []byte) *fileRead {
	fr := &fileRead{i: i, held: true, slab: slab}
	if fr.slab == nil {
		if fr.slab, fr.err = offheap.AllocAligned(int(c.slabSize), diskio.DirectAlign); fr.err != nil {
			return fr
		}
	}
	if fr.file, fr.err = diskio.OpenDirect(s.path); fr.err != nil {
		return fr
	}
	if fr.file.Size() != s.size {
		fr.err = errReplaced // rewritten since the lookup, with MTP state
		return fr
	}
	fr.res, fr.err = c.pool.Submit(ctx, diskio.ReadRequest{File: fr.file, Off: 0, Len: s.size, Slab: fr.slab})
	return fr
}

// finish closes a read's file and returns its slab.
func (rd *restoreReads) finish(fr *fileRead) {
	if fr.file != nil {
		fr.file.Close()
	}
	if fr.held {
		rd.c.slabs <- fr.slab
	}
}

// close waits for the reads still in flight (a restore that stopped early).
func (rd *restoreReads) close() {
	for _, fr := range rd.inflight {
		if fr.err == nil && fr.res != nil {
			<-fr.res
		}
		rd.finish(fr)
	}
	rd.inflight = nil
}

// failed handles a block file that could not be read: an invalid one is
// deleted and logged; one that is gone, or a read error, just ends the
// restore.
func (rd *restoreReads) failed(s source, err error) error {
	switch {
	case errors.Is(err, errBadFile):
		rd.c.invalid(s, err)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errReplaced), rd.ctx.Err() != nil:
	default:
		rd.c.log.Warn("prompt cache: cannot read a block file", "path", s.path, "err", err)
	}
	return err
}

// verify parses a block file read for source s and checks that it is the
// block the chain expects, from this cache's identity.
func (c *Cache) verify(s source, raw []byte) (*block, error) {
	id, b, err := parseBlock(raw)
	if err == nil {
		err = c.check(s, id, b)
	}
	if err != nil {
		c.invalid(s, err)
		return nil, err
	}
	return b, nil
}

func (c *Cache) check(s source, id Hash, b *block) error {
	B, g := c.bt, c.geo
	switch {
	case id != c.root:
		return fmt.Errorf("%w: it belongs to another model, block size or engine (identity %s)", errBadFile, id.String()[:idDirLen])
	case b.hash != s.file.hash || b.parent != s.parent:
		return fmt.Errorf("%w: it holds block %s after %s", errBadFile, b.hash.String()[:idDirLen], b.parent.String()[:idDirLen])
	case b.start != s.k*B || len(b.tokens) != B:
		return fmt.Errorf("%w: it holds tokens [%d, %d), want [%d, %d)", errBadFile, b.start, b.start+len(b.tokens), s.k*B, (s.k+1)*B)
	case len(b.data) != g.BlockFloats(b.start, b.start+B, b.mtp):
		return fmt.Errorf("%w: %d state values, want %d", errBadFile, len(b.data), g.BlockFloats(b.start, b.start+B, b.mtp))
	case b.mtp && len(b.hidden) != c.opts.Identity.Hidden:
		return fmt.Errorf("%w: a hidden state of %d values, want %d", errBadFile, len(b.hidden), c.opts.Identity.Hidden)
	}
	if want := chainHashes(b.parent, b.tokens, B); want[0] != b.hash {
		return fmt.Errorf("%w: its hash does not match its tokens", errBadFile)
	}
	return nil
}

// invalid deletes the file of s and logs why.
// (unless the index moved on: then whoever dropped it, or the newer file,
// owns the path).
func (c *Cache) invalid(s source, why error) {
	c.mu.Lock()
	if c.diskFile(s.file.hash) != s.file {
		c.mu.Unlock()
		return
	}
	c.disk.drop(s.file)
	c.st.Invalid++
	c.mu.Unlock()
	c.log.Warn("prompt cache: ignored and deleted an invalid block file", "model", c.opts.Identity.Name, "path", s.path, "reason", why)
	c.disk.removeFile(s.path)
}
