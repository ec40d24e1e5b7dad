package draftgate

import "time"

// Report says what a gate chose and what each mode cost, as /stats and
// spool run --json show it.
type Report struct {
	// Choice is the mode the gate chose, "draft" or "plain", or
	// "exploring" before it has measured both (a re-check of the other
	// mode does not change it).
	Choice string `json:"choice"`
	// Switches counts the re-checks that overturned the choice.
	Switches int `json:"switches"`
	// Acceptance is the share of the drafts accepted.
	Acceptance float64  `json:"acceptance"`
	Draft      ModeCost `json:"draft"`
	Plain      ModeCost `json:"plain"`
}

// ModeCost is what one mode's steps cost.
type ModeCost struct {
	Steps    int     `json:"steps"`
	Tokens   int     `json:"tokens"`
	Drafts   int     `json:"drafts,omitempty"`
	Accepted int     `json:"accepted,omitempty"`
	Bytes    int64   `json:"expert_bytes"`
	Seconds  float64 `json:"seconds"`
	// BytesPerToken and SecondsPerToken are what an emitted token cost.
	BytesPerToken   float64 `json:"expert_bytes_per_token"`
	SecondsPerToken float64 `json:"seconds_per_token"`
}

// Cost is the mode's steps' cost.
func (m ModeCost) Cost() Cost {
	return Cost{Steps: m.Steps, Tokens: m.Tokens, Drafts: m.Drafts, Accepted: m.Accepted, Bytes: m.Bytes, Time: time.Duration(m.Seconds * float64(time.Second))}
}

// Exploring is Report.Choice before a gate has chosen.
const Exploring = "exploring"

// NewReport reports choice ("draft", "plain" or Exploring), the switches,
// and the costs of each mode's steps (indexed by Mode).
func NewReport(choice string, switches int, costs [2]Cost) Report {
	mc := func(c Cost) ModeCost {
		return ModeCost{
			Steps: c.Steps, Tokens: c.Tokens, Drafts: c.Drafts, Accepted: c.Accepted, Bytes: c.Bytes, Seconds: c.Time.Seconds(),
			BytesPerToken: c.BytesPerToken(), SecondsPerToken: c.SecondsPerToken(),
		}
	}
	return Report{
		Choice: choice, Switches: switches, Acceptance: costs[Draft].Acceptance(),
		Draft: mc(costs[Draft]), Plain: mc(costs[Plain]),
	}
}
