package status

import (
	"github.com/spoolhq/spool/engine/remote"
)

// Phase is where the engine, or one request, stands.
type Phase string

// The engine's lifecycle.
const (
	// Stopped: no engine runs.
	Stopped Phase = "stopped"
	// Loading: the engine is being opened (Engine.Detail says the step).
	Loading Phase = "loading"
	// Failed: the engine could not start, or stopped on an error.
	Failed Phase = "failed"
)

// The phases of a serving engine: ready with nothing in flight, else the
// phase of its busiest request.
const (
	Ready      Phase = "ready"
	Queued     Phase = "queued"     // waiting for a sequence
	Prefilling Phase = "prefilling" // reading the prompt
	Generating Phase = "generating" // producing tokens
)

// The phases of a remote engine the server forwards to, besides ready
// and generating.
const (
	Connecting  Phase = "connecting"  // not yet probed
	Unreachable Phase = "unreachable" // its last exchange failed
)

// rank orders the phases of requests: the busiest wins.
func (p Phase) rank() int {
	switch p {
	case Queued:
		return 1
	case Prefilling:
		return 2
	case Generating:
		return 3
	}
	return 0
}

// Engine is the engine's lifecycle, as the app's host sets it.
type Engine struct {
	Phase Phase
	// Detail is the loading step, the error, or a note on a ready engine.
	Detail string
	// Progress is the loading's, 0..1.
	Progress float64
	// URL is the API's base URL once it listens.
	URL string
	// ModelDir is the model directory; Remote the remote engine's URL when
	// the server forwards to one.
	ModelDir string
	Remote   string
}

// PrefillEvent is a request's prompt-reading progress.
type PrefillEvent struct {
	ID           string `json:"id"`
	PromptTokens int    `json:"prompt_tokens"`
	CachedTokens int    `json:"cached_tokens"`
	Done         int    `json:"done"`
}

// RequestStatus is one request in flight.
type RequestStatus struct {
	ID           string `json:"id"`
	Phase        Phase  `json:"phase"`
	PromptTokens int    `json:"prompt_tokens"`
	CachedTokens int    `json:"cached_tokens"`
	// PrefillDone counts prompt tokens read (cached ones included).
	PrefillDone      int `json:"prefill_done"`
	CompletionTokens int `json:"completion_tokens"`
	// TokensPerSecond is the request's decode rate so far: its tokens
	// after the first over the time since the first.
	TokensPerSecond float64 `json:"tokens_per_second"`
}

// RequestSummary describes a request that ended, from its own counts: the
// figures its usage reports.
type RequestSummary struct {
	ID string `json:"id"`
	// Finish is stop, length, tool_calls, cancelled or error.
	Finish           string  `json:"finish"`
	PromptTokens     int     `json:"prompt_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	PrefillMS        float64 `json:"prefill_ms"`
	DecodeMS         float64 `json:"decode_ms"`
	// PrefillTokensPerSecond counts the prompt tokens read (not cached);
	// DecodeTokensPerSecond the tokens after the first over the time since
	// the first (the first token's time is the prefill's).
	PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second"`
	DecodeTokensPerSecond  float64 `json:"decode_tokens_per_second"`
}

// Status is where a serving engine stands: ready, or the phase of its
// busiest request (the events websocket's "state").
type Status struct {
	// State is ready, queued, prefilling or generating.
	State Phase `json:"state"`
	// TokensPerSecond sums the decode rates of the requests generating.
	TokensPerSecond float64 `json:"tokens_per_second"`
	// Active counts requests holding a sequence, Queued those waiting.
	Active   int             `json:"active"`
	Queued   int             `json:"queued"`
	Model    string          `json:"model"`
	Requests []RequestStatus `json:"requests"`
	// Last is the most recent request that ended.
	Last *RequestSummary `json:"last,omitempty"`
	// Engine is "remote" while the server forwards to a remote engine
	// (Remote says how it is doing); empty for the local engine.
	Engine string         `json:"engine,omitempty"`
	Remote *RemoteSummary `json:"remote,omitempty"`
}

// RemoteSummary is the remote engine's state in Status: no model list.
type RemoteSummary struct {
	Endpoint  string  `json:"endpoint"`
	Reachable bool    `json:"reachable"`
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
}

// RemotePhase is the phase of a remote engine: connecting before its first
// probe, unreachable, generating or ready.
func RemotePhase(st remote.Status) Phase {
	switch {
	case st.CheckedAt == nil && !st.Reachable:
		return Connecting
	case !st.Reachable:
		return Unreachable
	case st.Active > 0:
		return Generating
	}
	return Ready
}

// remoteStatus is Status for a remote engine: ready or generating (the
// remote's own queue is not visible), the model it serves, and the last
// reply's figures from its usage. The rate while a reply streams is not
// known until its usage arrives: TokensPerSecond is 0 then.
func remoteStatus(st remote.Status) Status {
	out := Status{State: Ready, Active: st.Active, Requests: []RequestStatus{}, Engine: "remote",
		Remote: &RemoteSummary{Endpoint: st.Endpoint, Reachable: st.Reachable, LatencyMS: st.LatencyMS, Error: st.Error}}
	if len(st.Models) > 0 {
		out.Model = st.Models[0].ID
	}
	if st.Active > 0 {
		out.State = Generating
	}
	if l := st.Last; l != nil {
		finish := l.Outcome
		if finish == "ok" {
			finish = "stop"
		}
		out.Last = &RequestSummary{Finish: finish, PromptTokens: l.PromptTokens, CachedTokens: l.CachedTokens, CompletionTokens: l.CompletionTokens,
			PrefillMS: l.FirstTokenMS, DecodeMS: max(l.DurationMS-l.FirstTokenMS, 0), DecodeTokensPerSecond: l.DecodeTokensPerSecond}
	}
	return out
}
