package generate

import (
	"context"

	"github.com/spoolhq/spool/engine/model"
)

// MaxPendingMTP bounds the hidden states a sequence keeps for its MTP layer
// to absorb: while a request decodes batched with others it does not draft,
// and its oldest states are dropped past this bound (the drafts get a
// shorter memory, the tokens do not change). The memory plan counts it
// (plan.MTPPendingRows).
const MaxPendingMTP = 64

// mtpQueue holds copies of the final-normed hidden states of consecutive
// positions from, from+1, ... that the MTP layer has not absorbed; each
// pairs with the token one position later.
type mtpQueue struct {
	from, n int
	hidden  int
	buf     []float32 // [MaxPendingMTP × hidden]
	rows    [][]float32
	next    []int
}

func newMTPQueue(hidden int) *mtpQueue {
	q := &mtpQueue{hidden: hidden, buf: make([]float32, MaxPendingMTP*hidden), rows: make([][]float32, MaxPendingMTP), next: make([]int, MaxPendingMTP)}
	for i := range q.rows {
		q.rows[i] = q.buf[i*hidden : (i+1)*hidden : (i+1)*hidden]
	}
	return q
}

// push appends the hidden state of position pos (copied). A position that
// does not follow the queue's last restarts it; a full queue drops its
// oldest.
func (q *mtpQueue) push(pos int, h []float32) {
	if q.n > 0 && pos != q.from+q.n {
		q.n = 0
	}
	if q.n == 0 {
		q.from = pos
	}
	if q.n == MaxPendingMTP {
		copy(q.buf, q.buf[q.hidden:])
		q.from++
		q.n--
	}
	copy(q.rows[q.n], h)
	q.n++
}

// draftNext lets the MTP layer absorb every pending hidden state, the
// newest paired with the token about to be forwarded, and returns its
// prediction of the token after that one: the draft.
func (d *Decoder) draftNext(ctx context.Context) (int, error) {
	q := d.mtp
	tokens := d.seq.Tokens()
	for j := range q.n {
		if p := q.from + j + 1; p < len(tokens) {
			q.next[j] = tokens[p]
		} else {
			q.next[j] = d.next
		}
	}
	before := d.m.ExpertBytesRead()
	var draft int
	for off := 0; off < q.n; off += d.p.PrefillChunk {
		end := min(off+d.p.PrefillChunk, q.n)
		logits, _, err := d.r.MTPForward(ctx, model.MTPRequest{Seq: d.seq, Pos: q.from + off, Hidden: q.rows[off:end], Next: q.next[off:end], LastOnly: true})
		if err != nil {
			return 0, err
		}
		draft = Argmax(logits[0])
	}
	d.res.DecodeExpertBytes += d.m.ExpertBytesRead() - before
	q.n = 0
	d.res.DraftsProposed++
	return draft, nil
}

// absorbPrompt runs the MTP layer over a prompt chunk's rows (positions
// from..from+len(hidden)-1) whose next token is a prompt token: all of
// them, or all but the last after the last chunk, whose row waits in the
// queue for the first sampled token. hidden are the chunk's output rows.
func (d *Decoder) absorbPrompt(ctx context.Context, from int, hidden [][]float32, last bool) error {
	n := len(hidden)
	if last {
		// Copy the waiting row before the MTP forward reuses its buffer.
		d.mtp.push(from+n-1, hidden[n-1])
		n--
	}
	if n == 0 {
		return nil
	}
	before := d.m.ExpertBytesRead()
	_, _, err := d.r.MTPForward(ctx, model.MTPRequest{Seq: d.seq, Pos: from, Hidden: hidden[:n], Next: d.prompt[from+1 : from+n+1], LastOnly: true})
	d.res.PrefillExpertBytes += d.m.ExpertBytesRead() - before
	d.touched.Union(d.r.LastExperts())
	return err
}
