package generate

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolhq/spool/engine/promptcache"
)

// maxStoreWait bounds how long storing blocks waits for the disk to take
// the blocks evicted from memory: past it they are dropped (only cache is
// lost), so that a slow or stuck disk never stalls generation.
const maxStoreWait = 2 * time.Second

// store puts the sequence's blocks into the prompt cache (see
// promptcache.Cache.Store).
func (d *Decoder) store(ctx context.Context, hidden promptcache.Hidden) promptcache.Stored {
	ctx, cancel := context.WithTimeout(ctx, maxStoreWait)
	defer cancel()
	return d.p.PromptCache.Store(ctx, d.seq, hidden)
}

// Restore brings in what the prompt cache (Params.PromptCache) holds of
// the prompt beyond the prefix the sequence holds, and sets the MTP layer
// up to continue from there (with the restored MTP state when the blocks
// carry it; else its drafts may differ, its tokens never do). Next calls it
// before the first prompt chunk when the driver has not; a driver calls it
// itself to bound it by the request's own context, before any forward of
// the runner's outputs is pending. It reports the prefill's start to
// OnPrefill. Its error is ctx's, after which the sequence holds what it
// held; a block that cannot be read only ends the restore early.
func (d *Decoder) Restore(ctx context.Context) error {
	if d.restored {
		return nil
	}
	d.restored = true
	var r promptcache.Restored
	if c := d.p.PromptCache; c != nil {
		if m := c.Lookup(d.prompt); m.Tokens > d.seq.Len() && !d.p.Embed {
			var err error
			if r, err = c.Restore(ctx, d.seq, m); err != nil {
				return fmt.Errorf("generate: prompt cache: %w", err)
			}
		}
	}
	if d.mtp != nil {
		if err := d.continueMTP(ctx, r); err != nil {
			return fmt.Errorf("generate: MTP layer: %w", err)
		}
	}
	d.prefilled = d.seq.Len()
	d.res.CachedTokens = d.prefilled
	d.res.RestoredTokens, d.res.RestoreTime = r.Added, r.Elapsed
	d.progress(d.prefilled)
	return nil
}

// continueMTP makes the MTP cache end where the sequence does, so that the
// first prompt chunk's rows continue it: the restored hidden state of the
// sequence's last position is absorbed with the prompt's next token; a
// cache one position short has the sequence's last token forwarded again
// (its hidden state is the MTP layer's next input); any other starts over
// at the sequence's end.
func (d *Decoder) continueMTP(ctx context.Context, r promptcache.Restored) error {
	n := d.seq.Len()
	switch end := d.seq.MTPEnd(); {
	case r.MTP:
		_, err := d.absorbMTP(ctx, [][]float32{r.Hidden}, d.prompt[n:n+1], true)
		return err
	case end == n:
	case end == n-1:
		d.seq.Trim(n - 1)
	default:
		d.seq.ResetMTP(n)
	}
	return nil
}

// storePrompt puts the blocks of the prompt chunk that starts at from
// (whose output rows are hidden) into the prompt cache, and counts the
// prompt tokens it added.
func (d *Decoder) storePrompt(ctx context.Context, from int, hidden [][]float32) {
	if d.p.PromptCache != nil && !d.p.Embed {
		d.res.CacheCreationTokens += d.store(ctx, promptcache.Hidden{From: from, Rows: hidden}).Tokens
	}
}

// storeDecoded puts the blocks that end among the n decoded positions from
// from on, whose hidden states the MTP layer has just absorbed, into the
// prompt cache with their MTP state (the hidden states are not kept past
// their absorption).
func (d *Decoder) storeDecoded(ctx context.Context, from, n int) {
	c := d.p.PromptCache
	if c == nil {
		return
	}
	if B := c.BlockTokens(); (from+n)/B > from/B {
		d.store(ctx, promptcache.Hidden{From: from, Rows: d.mtp.rows[:n]})
	}
}

// keepState, at the end, lets the MTP layer absorb the pending hidden
// states whose next token the sequence holds, so that its cache ends one
// position short of the sequence's and the next turn continues it (unless
// the gate chose plain steps), then
// stores the sequence's blocks (with MTP state where the hidden states are
// at hand) in the prompt cache.
func (d *Decoder) keepState(ctx context.Context) {
	var hidden promptcache.Hidden
	if q := d.mtp; q != nil {
		n := d.seq.Len()
		if q.n > 0 && q.from == d.seq.MTPEnd() {
			held := min(q.n, max(n-q.from, 0)) // states of positions the sequence holds
			hidden = promptcache.Hidden{From: q.from, Rows: q.rows[:held]}
			// While the gate chooses plain steps the MTP layer is left to
			// start over when drafting resumes: absorbing would read its
			// experts, which a decode that does not draft never reads.
			if k := min(held, n-1-q.from); k > 0 && ctx.Err() == nil && d.drafting.keepMTP() {
				// An error leaves the MTP cache as it was: drafts only.
				d.absorbMTP(ctx, q.rows[:k], d.seq.Tokens()[q.from+1:q.from+k+1], false)
			}
		}
		q.n = 0
	}
	if d.p.PromptCache != nil && !d.p.Embed {
		d.store(ctx, hidden)
	}
}
