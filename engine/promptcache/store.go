package promptcache

import (
	"context"
	"time"

	"github.com/spoolhq/spool/engine/kvcache"
)

// Hidden hands Store the final-normed hidden states (model.Output.Hidden)
// of positions From, From+1, ... of the sequence being stored. A block
// carries MTP state (its MTP rows and the hidden state of its last
// position, which the MTP layer consumes next) only when Store is given
// that hidden state and the sequence's MTP cache holds the block's rows
// (kvcache.Sequence.HasMTPRows). Rows may be nil where a hidden state is
// not at hand; the zero Hidden stores blocks without MTP state.
type Hidden struct {
	From int
	Rows [][]float32
}

func (h Hidden) at(p int) []float32 {
	if i := p - h.From; i >= 0 && i < len(h.Rows) {
		return h.Rows[i]
	}
	return nil
}

// Stored reports what a Store call added.
type Stored struct {
	// Blocks and Tokens count the blocks new to the cache (blocks that
	// gained MTP state are not counted again).
	Blocks, Tokens int
}

// Store caches every full block of seq's tokens that the cache lacks, and
// marks the others used. It copies the state out of seq, which the caller
// must not forward meanwhile; writing to disk happens later, on the cache's
// writer. When the blocks evicted to make room wait for the disk, Store
// waits for the writer until ctx ends, then drops them (loses only cache).
// It never fails: a block it cannot keep is not kept.
func (c *Cache) Store(ctx context.Context, seq *kvcache.Sequence, hidden Hidden) Stored {
	tokens := seq.Tokens()
	n := len(tokens) / c.bt
	if n == 0 || !sameGeometry(seq.Geometry(), c.geo) {
		return Stored{}
	}
	hashes := chainHashes(c.root, tokens, c.bt)
	B := c.bt
	withMTP := func(k int) bool {
		end := (k + 1) * B
		h := hidden.at(end - 1)
		return h != nil && len(h) == c.opts.Identity.Hidden && seq.HasMTPRows(kvcache.BlockMTPRange(k*B, end))
	}

	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return Stored{}
	}
	c.touchActive()
	var need []int
	for k := range n {
		if !c.have(hashes[k], withMTP(k)) {
			need = append(need, k)
		}
	}
	c.mu.Unlock()

	made := make(map[int]*block, len(need))
	for _, k := range need {
		mtp := withMTP(k)
		data, err := seq.ExportBlock(nil, k*B, (k+1)*B, mtp)
		if err != nil {
			c.log.Warn("prompt cache: cannot export a block", "err", err)
			break
		}
		b := &block{hash: hashes[k], parent: c.parent(hashes, k), start: k * B, tokens: append([]int(nil), tokens[k*B:(k+1)*B]...), data: data, mtp: mtp}
		if mtp {
			b.hidden = append([]float32(nil), hidden.at((k+1)*B-1)...)
		}
		made[k] = b
	}

	stopWait := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer stopWait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return Stored{}
	}
	var st Stored
	c.op++
	op, now := c.op, time.Now()
	var anchor *memEntry
	var diskHint *diskFile
	for k := range n {
		used := recency(now, k)
		if b := made[k]; b != nil && !c.have(b.hash, b.mtp) {
			if c.mem.find(b.hash) == nil && c.diskFile(b.hash) == nil {
				st.Blocks++
				st.Tokens += B
			}
			c.replace(b.hash)
			c.st.Memory.WrittenBytes += 4 * int64(len(b.data)+len(b.hidden))
			if e := c.admit(ctx, b, c.disk != nil, op, used, anchor, true); e != nil {
				anchor = e
			}
			continue
		}
		if e := c.mem.blocks[hashes[k]]; e != nil {
			e.op, e.used = op, used
			c.place(e, anchor)
			anchor = e
		}
		if f := c.diskFile(hashes[k]); f != nil {
			c.disk.touch(f, used, diskHint)
			diskHint = f
		}
	}
	c.st.StoredTokens += int64(st.Tokens)
	c.signal()
	return st
}

// have reports whether the cache holds block h, with MTP state when mtp is
// asked for; c.mu held.
func (c *Cache) have(h Hash, mtp bool) bool {
	if b := c.mem.find(h); b != nil {
		return b.mtp || !mtp
	}
	if f := c.diskFile(h); f != nil {
		return f.mtp || !mtp
	}
	return false
}

// diskFile returns this identity's file of block h, or nil; c.mu held.
func (c *Cache) diskFile(h Hash) *diskFile {
	if c.disk == nil {
		return nil
	}
	return c.disk.files[h]
}

// parent is the chain hash before block k.
func (c *Cache) parent(hashes []Hash, k int) Hash {
	if k == 0 {
		return c.root
	}
	return hashes[k-1]
}

// sameGeometry compares what two geometries store per token, the MTP flag
// aside.
func sameGeometry(a, b kvcache.Geometry) bool {
	if a.Layers != b.Layers || a.KVLora != b.KVLora || a.Rope != b.Rope || a.MainFloats() != b.MainFloats() {
		return false
	}
	for l := range a.Layers {
		ai := l < len(a.Indexer) && a.Indexer[l] && a.IndexDim > 0
		bi := l < len(b.Indexer) && b.Indexer[l] && b.IndexDim > 0
		if ai != bi {
			return false
		}
	}
	return true
}
