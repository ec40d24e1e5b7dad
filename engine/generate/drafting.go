package generate

import (
	"time"

	"github.com/spoolhq/spool/engine/draftgate"
)

// drafting is a speculative decoder's part of its gate: the mode of each
// decode step the sequence is forwarded alone, what that step cost (the
// routed-expert bytes of its MTP layer's and its own forward, and its
// wall time on the gate's clock), reported to the gate and summed for the
// generation's Result.
type drafting struct {
	gate     *draftgate.Gate // nil: every lone step drafts
	switches int             // the gate's switches before this generation

	// The lone step in flight.
	lone     bool
	stepMode draftgate.Mode
	began    time.Time
	bytes    int64 // read by the step's MTP forward

	costs [2]draftgate.Cost // this generation's lone steps, by mode

	// seam, set by tests, replaces each draft (to make drafts miss).
	seam func(draft int) int
}

func (g *drafting) use(gate *draftgate.Gate) {
	g.gate = gate
	if gate != nil {
		g.switches = gate.Report().Switches
	}
}

// mode is the mode the gate asks for.
func (g *drafting) mode() draftgate.Mode {
	if g.gate == nil {
		return draftgate.Draft
	}
	return g.gate.Mode()
}

// keepMTP reports whether the MTP layer is kept abreast of the sequence
// (it absorbs every hidden state, in a batch if need be): while drafting
// is the choice or still to be explored. While plain steps are, it is
// left behind, to start over when a re-check drafts.
func (g *drafting) keepMTP() bool {
	return g.gate == nil || g.gate.Choice() != draftgate.Plain.String()
}

func (g *drafting) now() time.Time {
	if g.gate == nil {
		return time.Now()
	}
	return g.gate.Now()
}

// begin starts a decode step run in mode; lone says it is measured.
func (g *drafting) begin(lone bool, mode draftgate.Mode) {
	g.lone, g.stepMode, g.bytes = lone, mode, 0
	if lone {
		g.began = g.now()
	}
}

// read adds bytes the MTP layer read during the step.
func (g *drafting) read(n int64) { g.bytes += n }

// end records a lone step that emitted tokens, whose draft was accepted
// or not, and whose forward read forwardBytes. A step that emitted none
// (a stop token ended the generation) measures nothing.
func (g *drafting) end(tokens int, accepted bool, forwardBytes int64) {
	if !g.lone || tokens == 0 {
		g.lone = false
		return
	}
	g.lone = false
	s := draftgate.Step{Mode: g.stepMode, Tokens: tokens, Accepted: accepted, Bytes: g.bytes + forwardBytes, Time: g.now().Sub(g.began)}
	g.costs[s.Mode].Add(s)
	if g.gate != nil {
		g.gate.Record(s)
	}
}

// report is what this generation's lone steps cost, with the gate's
// choice and the switches it made meanwhile.
func (g *drafting) report() *draftgate.Report {
	choice, switches := draftgate.Draft.String(), 0
	if g.gate != nil {
		choice, switches = g.gate.Choice(), g.gate.Switches()-g.switches
	}
	r := draftgate.NewReport(choice, switches, g.costs)
	return &r
}
