package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spoolhq/spool/engine/remote"
)

// A server built with NewRemote runs no engine: it forwards to a remote
// one (vLLM, SGLang, another Spool). The OpenAI endpoints pass through
// (remote.go, remotestream.go), /v1/messages is translated to the remote's
// chat API (remotemessages.go), and /stats and the events websocket
// report the remote's state. The security defaults are New's.

// NewRemote builds a server that forwards to the remote engine rc. The
// caller runs rc.Run, which keeps the reachability shown in /stats and on
// the events websocket current.
func NewRemote(cfg Config, rc *remote.Client) (*Server, error) {
	if rc == nil {
		return nil, errors.New("server: a remote server needs a remote engine")
	}
	cfg = cfg.withDefaults()
	if err := CheckBind(cfg.Host, cfg.APIKey); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		ids:     append([]string{cfg.ModelID, "spool"}, cfg.Aliases...),
		created: time.Now().Unix(),
		hub:     newHub(),
		remote:  rc,
	}
	s.guard = s.newGuard()
	s.handler = s.guard.Handler(s.routes())
	return s, nil
}

// RemoteStatus is the remote engine's state; ok is false for a server
// that runs its own engine.
func (s *Server) RemoteStatus() (st remote.Status, ok bool) {
	if s.remote == nil {
		return remote.Status{}, false
	}
	return s.remote.Status(), true
}

func (s *Server) handleRemoteStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.remoteStats())
}

// remoteModel resolves the model a request names to one the remote
// serves: a remote id as is; no model, Spool's own names (and, for
// /v1/messages, Claude's) the remote's first model.
func (s *Server) remoteModel(r *http.Request, id string, anthropic bool) (string, error) {
	isDefault := func(m string) bool {
		return slices.Contains(s.ids, m) || (anthropic && strings.HasPrefix(m, "claude-"))
	}
	model, ok, err := s.remote.Resolve(r.Context(), id, isDefault)
	if err != nil {
		return "", err
	}
	if !ok {
		var ids []string
		for _, m := range s.remote.Status().Models {
			ids = append(ids, fmt.Sprintf("%q", m.ID))
		}
		return "", notFound("model_not_found", "the model %q does not exist; the remote engine serves %s", id, strings.Join(ids, ", "))
	}
	return model, nil
}

// remoteAPIError maps a remote failure to the error answered to the
// client. The remote's own 4xx answers keep their status and fields; its
// 5xx answers, and failures to reach it, are the gateway's (502, 503,
// 504), so that a client can tell them from its own mistakes.
func remoteAPIError(err error) *apiError {
	var re *remote.Error
	if !errors.As(err, &re) {
		return asAPIError(err)
	}
	e := &apiError{Type: "server_error", Message: re.Message, RetryAfter: re.RetryAfterSeconds()}
	switch re.Kind {
	case remote.KindUnreachable:
		e.Status, e.Code, e.RetryAfter = http.StatusBadGateway, "remote_unreachable", max(e.RetryAfter, 1)
	case remote.KindTimeout:
		e.Status, e.Code = http.StatusGatewayTimeout, "remote_timeout"
	case remote.KindAuth:
		e.Status, e.Code = http.StatusBadGateway, "remote_auth_failed"
	case remote.KindProtocol:
		e.Status, e.Code = http.StatusBadGateway, "remote_protocol_error"
	default:
		e.Status, e.Type, e.Code, e.Param = re.Status, re.Type, re.Code, re.Param
		switch {
		case remote.IsContextExceeded(re):
			e.Code = "context_length_exceeded"
		case re.Status == http.StatusServiceUnavailable || re.Status == http.StatusTooManyRequests:
			e.RetryAfter = max(e.RetryAfter, 1)
		case re.Status >= 500:
			e.Status, e.Code = http.StatusBadGateway, "remote_error"
			e.Message = fmt.Sprintf("the remote engine failed (%d %s): %s", re.Status, http.StatusText(re.Status), re.Message)
		case re.Status == http.StatusNotFound && e.Code == "" && strings.Contains(strings.ToLower(re.Message), "model"):
			e.Code = "model_not_found"
		}
		if e.Status < 400 || e.Status > 599 {
			e.Status = http.StatusBadGateway
		}
	}
	return e
}

// remoteModelObject is one remote model as /v1/models lists it: the
// remote's entry, with context_length and max_model_len where known.
func remoteModelObject(m remote.Model) map[string]any {
	out := map[string]any{}
	if len(m.Raw) > 0 {
		json.Unmarshal(m.Raw, &out)
	}
	out["id"] = m.ID
	if _, ok := out["object"]; !ok {
		out["object"] = "model"
	}
	if m.ContextLength > 0 {
		out["context_length"] = m.ContextLength
		out["max_model_len"] = m.ContextLength
	}
	return out
}

func (s *Server) handleRemoteModels(w http.ResponseWriter, r *http.Request) {
	models, err := s.remote.Models(r.Context())
	if err != nil {
		writeError(w, r, remoteAPIError(err))
		return
	}
	data := make([]map[string]any, 0, len(models))
	for _, m := range models {
		data = append(data, remoteModelObject(m))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) handleRemoteModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	models, err := s.remote.Models(r.Context())
	if err != nil {
		writeError(w, r, remoteAPIError(err))
		return
	}
	for _, m := range models {
		if m.ID == id {
			writeJSON(w, http.StatusOK, remoteModelObject(m))
			return
		}
	}
	writeError(w, r, notFound("model_not_found", "the model %q does not exist on the remote engine", id))
}

// remoteState is the engine state shown for the remote: connecting
// (before the first probe), unreachable, generating or ready.
func remoteState(st remote.Status) string {
	switch {
	case st.CheckedAt == nil && !st.Reachable:
		return "connecting"
	case !st.Reachable:
		return "unreachable"
	case st.Active > 0:
		return "generating"
	}
	return "ready"
}

// RemoteSummary is the remote engine's state in Status: no model list.
type RemoteSummary struct {
	Endpoint  string  `json:"endpoint"`
	Reachable bool    `json:"reachable"`
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
}

func summaryOf(st remote.Status) *RemoteSummary {
	return &RemoteSummary{Endpoint: st.Endpoint, Reachable: st.Reachable, LatencyMS: st.LatencyMS, Error: st.Error}
}

// remoteStatus is Status for a remote engine: ready or generating (the
// remote's own queue is not visible), the model it serves, and the last
// reply's figures from its usage. The rate while a reply streams is not
// known until its usage arrives: TokensPerSecond is 0 then.
func (s *Server) remoteStatus() Status {
	st := s.remote.Status()
	out := Status{State: StateReady, Active: st.Active, Model: defaultModelID(st), Requests: []RequestStatus{}, Engine: "remote", Remote: summaryOf(st)}
	if st.Active > 0 {
		out.State = PhaseGenerating
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

// remoteHelloEvent is the first event: the remote's default model, the
// engine kind and the remote's reachability.
func (s *Server) remoteHelloEvent() Event {
	st := s.remote.Status()
	hello := map[string]any{"id": defaultModelID(st), "object": "model"}
	if len(st.Models) > 0 {
		hello = remoteModelObject(st.Models[0])
	}
	hello["engine"] = "remote"
	hello["remote"] = summaryOf(st)
	return Event{Type: "hello", Data: hello}
}

func defaultModelID(st remote.Status) string {
	if len(st.Models) > 0 {
		return st.Models[0].ID
	}
	return ""
}

// remoteStats is /stats of a remote server. There is no memory plan or
// expert map: those describe a local engine.
func (s *Server) remoteStats() map[string]any {
	st := s.remote.Status()
	out := map[string]any{
		"engine": map[string]any{"kind": "remote", "state": remoteState(st), "remote": st},
	}
	if len(st.Models) > 0 {
		out["model"] = remoteModelObject(st.Models[0])
	}
	if st.Last != nil {
		out["last_turn"] = st.Last
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	out["memory"] = map[string]any{"go_heap_bytes": mem.HeapAlloc, "go_sys_bytes": mem.Sys}
	return out
}
