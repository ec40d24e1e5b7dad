package scheduler

import (
	"time"

	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/generate"
)

// Stats is a snapshot of the scheduler.
type Stats struct {
	// State is "idle" or "generating".
	State    string `json:"state"`
	Active   int    `json:"active"`
	Queued   int    `json:"queued"`
	MaxBatch int    `json:"max_batch"`
	MaxQueue int    `json:"max_queue"`
	// Steps counts forwards; Tokens counts generated tokens; Requests
	// counts finished requests.
	Steps    uint64 `json:"steps"`
	Tokens   uint64 `json:"tokens"`
	Requests uint64 `json:"requests"`
	// LastBatch is the number of requests in the latest forward.
	LastBatch int `json:"last_batch"`
	// TokensPerSecond is the aggregate generation rate over the latest
	// steps (0 when idle).
	TokensPerSecond float64 `json:"tokens_per_second"`
	// PrefillChunks counts the forwards that carried a prompt chunk;
	// PrefillExpertBytes and DecodeExpertBytes split the routed-expert
	// bytes read from storage between those forwards (with their MTP
	// passes) and the others.
	PrefillChunks      uint64 `json:"prefill_chunks"`
	PrefillExpertBytes int64  `json:"prefill_expert_bytes"`
	DecodeExpertBytes  int64  `json:"decode_expert_bytes"`
	// PrefillExpertsTouched is the distinct (layer, expert) pairs the
	// latest completed prefill acquired.
	PrefillExpertsTouched int `json:"prefill_experts_touched"`
	// Sequences counts the sequences holding state, active and idle (at
	// most MaxBatch).
	Sequences int `json:"sequences"`
	// Drafting sums what the finished speculative requests' lone decode
	// steps cost with drafting and without, with the choice of the latest
	// one's gate (nil before the first).
	Drafting *draftgate.Report `json:"drafting,omitempty"`
	// LastRequest describes the most recently finished request.
	LastRequest *Result `json:"-"`
}

// Stats returns a snapshot.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.MaxBatch, st.MaxQueue = s.cfg.MaxBatch, s.cfg.MaxQueue
	if st.State == "" {
		st.State = "idle"
	}
	if st.State == "generating" {
		st.TokensPerSecond = s.window.rate()
	}
	if st.LastRequest != nil {
		r := *st.LastRequest
		st.LastRequest = &r
	}
	if st.Drafting != nil {
		d := *st.Drafting
		st.Drafting = &d
	}
	return st
}

// recordDrafting adds a finished request's drafting report (nil for one
// that did not speculate) to the totals; s.mu is held.
func (s *Scheduler) recordDrafting(r *draftgate.Report) {
	if r == nil {
		return
	}
	var costs [2]draftgate.Cost
	switches := r.Switches
	if t := s.stats.Drafting; t != nil {
		costs = [2]draftgate.Cost{draftgate.Draft: t.Draft.Cost(), draftgate.Plain: t.Plain.Cost()}
		switches += t.Switches
	}
	costs[draftgate.Draft] = costs[draftgate.Draft].Plus(r.Draft.Cost())
	costs[draftgate.Plain] = costs[draftgate.Plain].Plus(r.Plain.Cost())
	total := draftgate.NewReport(r.Choice, switches, costs)
	s.stats.Drafting = &total
}

// Sequences is the number of sequences holding state (active and idle),
// at most MaxBatch.
func (s *Scheduler) Sequences() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats.Sequences
}

// setState records the batch size of a step (0: idle).
func (s *Scheduler) setState(batch int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if batch == 0 {
		s.idleLocked()
		return
	}
	s.stats.State = "generating"
	s.stats.LastBatch = batch
}

// idleLocked marks the scheduler idle; s.mu is held.
func (s *Scheduler) idleLocked() {
	s.stats.State = "idle"
	s.window = rateWindow{}
}

// recordStep adds one forward that produced tokens in elapsed and whose
// step read expertBytes; prefill says it carried a prompt chunk.
func (s *Scheduler) recordStep(tokens int, elapsed time.Duration, prefill bool, expertBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Steps++
	s.stats.Tokens += uint64(tokens)
	if prefill {
		s.stats.PrefillChunks++
		s.stats.PrefillExpertBytes += expertBytes
	} else {
		s.stats.DecodeExpertBytes += expertBytes
	}
	s.window.add(tokens, elapsed)
}

// recordPrefill notes a completed prefill.
func (s *Scheduler) recordPrefill(r *generate.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.PrefillExpertsTouched = r.PrefillExpertsTouched
}

// rateWindow averages tokens per second over the latest steps.
type rateWindow struct {
	tokens [32]int
	times  [32]time.Duration
	next   int
	n      int
}

func (w *rateWindow) add(tokens int, d time.Duration) {
	w.tokens[w.next], w.times[w.next] = tokens, d
	w.next = (w.next + 1) % len(w.tokens)
	w.n = min(w.n+1, len(w.tokens))
}

func (w *rateWindow) rate() float64 {
	var tok int
	var d time.Duration
	for i := 0; i < w.n; i++ {
		tok += w.tokens[i]
		d += w.times[i]
	}
	if d <= 0 {
		return 0
	}
	return float64(tok) / d.Seconds()
}
