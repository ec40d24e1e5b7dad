package server

import (
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/spoolhq/spool/engine/access"
	"github.com/spoolhq/spool/engine/api/anthropic"
	"github.com/spoolhq/spool/engine/api/openai"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/turn"
)

// modelObject is the /v1/models entry of the served model.
func (s *Server) modelObject() openai.Model {
	m := s.eng.Scheduler.Model()
	return openai.ModelOf(openai.Served{ID: s.cfg.ModelID, Created: s.created, Context: s.local.Context(), MaxOutput: s.local.MaxOutput(),
		Template: s.local.Template() != nil, Constrained: s.local.Constrained(), MTP: m.HasMTP(), DSA: m.HasDSA()})
}

// anthropicModel is the served model in Anthropic's shape.
func (s *Server) anthropicModel() anthropic.Model {
	m := s.modelObject()
	return anthropic.NewModel(m.ID, time.Unix(m.Created, 0), m.ContextLength, m.MaxOutput)
}

// handleModels lists the served model, in Anthropic's shape to an
// Anthropic client (the anthropic-version header), else OpenAI's.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	if apiwire.WantsAnthropic(r) {
		writeJSON(w, http.StatusOK, anthropic.NewModelList([]anthropic.Model{s.anthropicModel()}))
		return
	}
	writeJSON(w, http.StatusOK, openai.ModelList(s.modelObject()))
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wantsAnthropic := apiwire.WantsAnthropic(r)
	if err := s.checkModel(id, wantsAnthropic); err != nil || id == "" {
		apiwire.WriteModelError(w, r, apiwire.NotFound("model_not_found", "the model %q does not exist; this server serves %q", id, s.cfg.ModelID))
		return
	}
	if wantsAnthropic {
		// A Claude name is the served model, as /v1/messages takes it.
		m := s.anthropicModel()
		if strings.HasPrefix(id, "claude-") {
			m.ID = id
		}
		writeJSON(w, http.StatusOK, m)
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

// handleHealth is public and minimal: {"status": "ok"}, or 503 with
// "degraded" and what a client may be told of the internal errors since
// the server started (the log has their causes).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	access.From(r.Context()).SetQuiet()
	rep, ok := s.health.Report()
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, rep)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// lastTurn is the timing of the most recently finished request.
type lastTurn struct {
	FinishReason string `json:"finish_reason"`
	PromptTokens int    `json:"prompt_tokens"`
	CachedTokens int    `json:"cached_tokens"`
	// RestoredTokens is the part of CachedTokens restored from the
	// prompt cache (in RestoreMS); CacheCreationTokens the prompt tokens
	// whose blocks the request added to it.
	RestoredTokens      int     `json:"restored_tokens"`
	RestoreMS           float64 `json:"restore_ms"`
	CacheCreationTokens int     `json:"cache_creation_tokens"`
	CompletionTokens    int     `json:"completion_tokens"`
	Lane                string  `json:"lane"`
	PeakBatch           int     `json:"peak_batch"`
	QueueMS             float64 `json:"queue_ms"`
	PrefillMS           float64 `json:"prefill_ms"`
	DecodeMS            float64 `json:"decode_ms"`
	DecodeTPS           float64 `json:"decode_tokens_per_second"`
	DraftsProposed      int     `json:"mtp_drafts_proposed"`
	DraftsAccepted      int     `json:"mtp_drafts_accepted"`
	// Drafting is what the turn's lone decode steps cost with drafting and
	// without, and what its sequence's gate chose.
	Drafting *draftgate.Report `json:"drafting,omitempty"`
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.stats())
}

func (s *Server) stats() map[string]any {
	st := s.eng.Scheduler.Stats()
	m := s.eng.Scheduler.Model()
	out := map[string]any{
		"model": s.modelObject(),
		"engine": map[string]any{
			"state":     s.Status().State,
			"scheduler": st,
			"mtp":       m.HasMTP(),
			"dsa":       m.HasDSA(),
		},
	}
	if r := st.LastRequest; r != nil {
		lt := lastTurn{
			FinishReason: r.FinishReason, PromptTokens: r.PromptTokens, CachedTokens: r.CachedTokens,
			RestoredTokens: r.RestoredTokens, RestoreMS: turn.MS(r.RestoreTime), CacheCreationTokens: r.CacheCreationTokens,
			CompletionTokens: r.CompletionTokens, Lane: r.Lane, PeakBatch: r.PeakBatch,
			QueueMS: turn.MS(r.QueueWait), PrefillMS: turn.MS(r.PrefillTime), DecodeMS: turn.MS(r.DecodeTime),
			DraftsProposed: r.DraftsProposed, DraftsAccepted: r.DraftsAccepted, Drafting: r.Drafting,
		}
		if r.DecodeTime > 0 && r.CompletionTokens > 1 {
			lt.DecodeTPS = float64(r.CompletionTokens-1) / r.DecodeTime.Seconds()
		}
		out["last_turn"] = lt
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	out["memory"] = map[string]any{"go_heap_bytes": mem.HeapAlloc, "go_sys_bytes": mem.Sys}
	if e := s.eng.Experts; e != nil {
		// Hits are not read here: reading clears them, and the events
		// websocket is their reader.
		out["experts"] = map[string]any{"map": e.ExpertMap()}
	}
	if s.eng.Extra != nil {
		for k, v := range s.eng.Extra() {
			out[k] = v
		}
	}
	return out
}
