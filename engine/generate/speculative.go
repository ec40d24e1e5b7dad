package generate

import (
	"context"

	"github.com/spoolhq/spool/engine/model"
)

// MaxPendingMTP bounds the hidden states a sequence keeps for its MTP layer
// to absorb: while a request decodes batched with others it does not draft,
// and its MTP layer absorbs the pending states without drafting before
// they reach this bound. The memory plan counts it (plan.MTPPendingRows).
const MaxPendingMTP = 64

// The MTP layer's cache continues the main model's one position behind
// (kvcache's mtp.go explains the lag, and its operations keep it): the
// hidden states wait here for the token after them. The decoder keeps the
// MTP cache's rows contiguous and, unless state was missing (ResetMTP),
// starting at position 0, which is what lets the prompt cache store and
// restore it with the main cache's blocks.

// mtpQueue holds copies of the final-normed hidden states of consecutive
// positions from, from+1, ... that the MTP layer has not absorbed (from is
// the MTP cache's end); each pairs with the token one position later.
type mtpQueue struct {
	from, n int
	// last is the states the latest decode step (or the prompt's last
	// chunk) queued: those a step that drafts after a drafting step
	// absorbs.
	last   int
	hidden int
	buf    []float32 // [MaxPendingMTP × hidden]
	rows   [][]float32
	next   []int
}

func newMTPQueue(hidden int) *mtpQueue {
	q := &mtpQueue{hidden: hidden, buf: make([]float32, MaxPendingMTP*hidden), rows: make([][]float32, MaxPendingMTP), next: make([]int, MaxPendingMTP)}
	for i := range q.rows {
		q.rows[i] = q.buf[i*hidden : (i+1)*hidden : (i+1)*hidden]
	}
	return q
}

// pushMTP queues a copy of the hidden state of position pos. A position
// that does not continue the MTP cache and the queue (not expected: the
// decoder keeps them contiguous) starts the MTP layer over there.
func (d *Decoder) pushMTP(pos int, h []float32) {
	q := d.mtp
	if pos != d.seq.MTPEnd()+q.n || q.n == MaxPendingMTP {
		q.n = 0
		d.seq.ResetMTP(pos)
	}
	if q.n == 0 {
		q.from = pos
	}
	copy(q.rows[q.n], h)
	q.n++
}

// absorbMTP runs the MTP layer over hidden states of the positions from the
// MTP cache's end on, pairing hidden[j] with next[j] (the token one
// position later), in forwards of at most PrefillChunk rows. It returns the
// logits of the last row (its prediction of the token after next's last),
// a view of the runner's buffers. What the forwards read counts as the
// prefill's or the decode's (prefill).
func (d *Decoder) absorbMTP(ctx context.Context, hidden [][]float32, next []int, prefill bool) ([]float32, error) {
	var logits [][]float32
	for off := 0; off < len(hidden); off += d.p.PrefillChunk {
		end := min(off+d.p.PrefillChunk, len(hidden))
		var err error
		logits, _, err = d.r.MTPForward(ctx, model.MTPRequest{Seq: d.seq, Pos: d.seq.MTPEnd(), Hidden: hidden[off:end], Next: next[off:end], LastOnly: true})
		d.chargeMTP(prefill)
		if err != nil {
			return nil, err
		}
		if d.Prefilling() {
			d.touched.Union(d.r.LastExperts())
		}
	}
	if logits == nil {
		return nil, nil
	}
	return logits[0], nil
}

// chargeMTP counts what the runner's latest forward, an MTP pass, read
// as the prefill's or the decode's.
func (d *Decoder) chargeMTP(prefill bool) {
	c := d.r.LastCost()
	if prefill {
		d.res.PrefillExpertBytes += c.Bytes
		d.res.PrefillExpertsRead += c.Experts
	} else {
		d.res.DecodeExpertBytes += c.Bytes
		d.res.DecodeExpertsRead += c.Experts
		d.drafting.read(c.Bytes)
	}
}

// absorbPending lets the MTP layer absorb every pending hidden state, the
// newest paired with the token about to be forwarded, and returns the
// prediction of the token after that one. Blocks whose last hidden state
// was among them join the prompt cache with their MTP state.
func (d *Decoder) absorbPending(ctx context.Context) ([]float32, error) {
	return d.absorbFirst(ctx, d.mtp.n)
}

// absorbFirst lets the MTP layer absorb the k oldest pending hidden
// states (each paired with the token one position later: the sequence's,
// or for the newest the token about to be forwarded) and returns the
// prediction that follows the last of them.
func (d *Decoder) absorbFirst(ctx context.Context, k int) ([]float32, error) {
	q := d.mtp
	tokens := d.seq.Tokens()
	for j := range k {
		if p := q.from + j + 1; p < len(tokens) {
			q.next[j] = tokens[p]
		} else {
			q.next[j] = d.next
		}
	}
	logits, err := d.absorbMTP(ctx, q.rows[:k], q.next[:k], false)
	if err != nil {
		return nil, err
	}
	d.storeDecoded(ctx, q.from, k)
	q.shift(k)
	return logits, nil
}

// shift drops the k oldest pending states (the MTP cache has absorbed
// them, or starts over after them).
func (q *mtpQueue) shift(k int) {
	if k >= q.n {
		q.from += q.n
		q.n = 0
		return
	}
	copy(q.buf, q.buf[k*q.hidden:q.n*q.hidden])
	q.from += k
	q.n -= k
}

// MaxCatchUp bounds the hidden states the MTP layer absorbs before a
// drafting step that follows steps which did not draft (batched ones, or
// plain ones the gate chose): older ones are dropped and the MTP layer
// starts over after them. Absorbing them all would read the union of the
// MTP layer's experts over every one (a decode that never drafts reads
// none; for GLM-5.2 8 states read about 57 of its 256 experts of 37.8 MB,
// a fifth of a token's reads, 4 about 31); the newest few give its
// attention the local context.
const MaxCatchUp = 4

// catchUp, before a drafting step, lets the MTP layer absorb the hidden
// states queued before those of the latest step (at most MaxCatchUp of
// them), so that the step's own MTP forward is the one a step after a
// drafting step runs. What it reads is no step's cost: it is the price of
// having switched modes. A decoder without a gate drafts after every step
// it can and absorbs its queue whole, as it always has.
func (d *Decoder) catchUp(ctx context.Context) error {
	q := d.mtp
	if d.drafting.gate == nil {
		return nil
	}
	older := q.n - q.last
	if older <= 0 {
		return nil
	}
	if drop := older - MaxCatchUp; drop > 0 {
		q.shift(drop)
		d.seq.ResetMTP(q.from)
		older = MaxCatchUp
	}
	_, err := d.absorbFirst(ctx, older)
	return err
}

// draftNext absorbs the pending hidden states and returns the MTP layer's
// prediction of the token after the one about to be forwarded: the draft.
func (d *Decoder) draftNext(ctx context.Context) (int, error) {
	logits, err := d.absorbPending(ctx)
	if err != nil {
		return 0, err
	}
	d.res.DraftsProposed++
	draft := Argmax(logits)
	if d.drafting.seam != nil {
		draft = d.drafting.seam(draft)
	}
	return draft, nil
}

// absorbPrompt runs the MTP layer over a prompt chunk's rows (positions
// from..from+len(hidden)-1) whose next token is a prompt token: all of
// them, or all but the last after the last chunk, whose row waits in the
// queue for the first sampled token. hidden are the chunk's output rows.
func (d *Decoder) absorbPrompt(ctx context.Context, from int, hidden [][]float32, last bool) error {
	n := len(hidden)
	if last {
		n--
	}
	// While the gate chooses plain steps (a sequence's later turn) the MTP
	// layer is left to start over when drafting resumes.
	if n > 0 && d.drafting.keepMTP() {
		_, err := d.absorbMTP(ctx, hidden[:n], d.prompt[from+1:from+n+1], true)
		if err != nil {
			return err
		}
	}
	if last {
		d.pushMTP(from+n, hidden[n])
		d.mtp.last = 1
	}
	return nil
}
