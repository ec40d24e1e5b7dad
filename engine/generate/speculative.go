package generate

import (
	"fmt"
)

// speculative decodes with one MTP draft per forward. The main model
// verifies [tok, draft] in one two-row forward; the position after tok is
// sampled from the main logits exactly as the plain path would, and the
// draft is kept only when it equals that sample, in which case the second
// row's logits give the next token for free.
//
// hidden holds the final-normed hidden states of prompt positions
// from..len(prompt)-1, which the MTP layer absorbs first.
func (g *run) speculative(logits []float32, from int, hidden [][]float32) error {
	tokens := g.seq.Tokens() // grows as the cache does
	pos := g.seq.Len()       // position of the token about to be emitted
	tok := g.sampler.Sample(logits)
	if done, err := g.emit(tok); done {
		g.keepStop()
		return err
	}
	// MTP rows pending: positions mtpFrom.. with their hidden states; each
	// pairs with the token one position later.
	mtpFrom := from
	pending := hidden
	for {
		if pos+2 > g.seq.Limit() {
			return g.finishPlain(tok)
		}
		next := make([]int, len(pending))
		for j := range pending {
			p := mtpFrom + j + 1
			if p < len(tokens) {
				next[j] = tokens[p]
			} else {
				next[j] = tok // the newest token, not yet forwarded
			}
		}
		draftLogits, _, err := g.m.MTPForward(g.ctx, g.seq, mtpFrom, pending, next, true)
		if err != nil {
			return fmt.Errorf("generate: MTP draft: %w", err)
		}
		draft := Argmax(draftLogits[0])
		g.res.DraftsProposed++

		if err := g.step([]int{tok, draft}); err != nil {
			return err
		}
		tokens = g.seq.Tokens()
		s1 := g.sampler.Sample(g.last[0])
		if done, err := g.emit(s1); done {
			g.keepStop()
			return err
		}
		if s1 != draft {
			g.seq.Trim(pos + 1)
			tokens = g.seq.Tokens()
			mtpFrom, pending = pos, g.lastHidden[:1]
			pos, tok = pos+1, s1
			continue
		}
		g.res.DraftsAccepted++
		s2 := g.sampler.Sample(g.last[1])
		if done, err := g.emit(s2); done {
			g.keepStop()
			return err
		}
		mtpFrom, pending = pos, g.lastHidden
		pos, tok = pos+2, s2
	}
}

// keepStop counts the newest emitted token as cached when a stop token ended
// generation (the plain path forwarded it before sampling the stop).
func (g *run) keepStop() {
	if g.res.FinishReason == FinishStop && len(g.res.Tokens) > 0 {
		g.keep++
	}
}

// finishPlain continues without drafts when the context has no room for a
// two-row verify.
func (g *run) finishPlain(tok int) error {
	if err := g.step([]int{tok}); err != nil {
		return err
	}
	return g.plain(g.last[0])
}
