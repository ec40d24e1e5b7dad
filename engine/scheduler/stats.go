package scheduler

import (
	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/generate"
)

// Stats is a snapshot of the scheduler's counts. Where the engine stands
// (ready, generating, ...) is engine/status's to say.
type Stats struct {
	Active   int `json:"active"`
	Queued   int `json:"queued"`
	MaxBatch int `json:"max_batch"`
	MaxQueue int `json:"max_queue"`
	// Steps counts forwards; Tokens counts generated tokens; Requests
	// counts finished requests.
	Steps    uint64 `json:"steps"`
	Tokens   uint64 `json:"tokens"`
	Requests uint64 `json:"requests"`
	// LastBatch is the number of requests in the latest forward.
	LastBatch int `json:"last_batch"`
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

// setBatch records the batch size of a step.
func (s *Scheduler) setBatch(batch int) {
	if batch == 0 {
		return
	}
	s.mu.Lock()
	s.stats.LastBatch = batch
	s.mu.Unlock()
}

// recordStep adds one forward that produced tokens and whose step read
// expertBytes; prefill says it carried a prompt chunk.
func (s *Scheduler) recordStep(tokens int, prefill bool, expertBytes int64) {
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
}

// recordPrefill notes a completed prefill.
func (s *Scheduler) recordPrefill(r *generate.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.PrefillExpertsTouched = r.PrefillExpertsTouched
}
