package server

import (
	"net/http"
	"runtime"

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

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, openai.ModelList(s.modelObject()))
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.checkModel(id, false); err != nil || id == "" {
		writeError(w, r, apiwire.NotFound("model_not_found", "the model %q does not exist; this server serves %q", id, s.cfg.ModelID))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

// handleHealth is public and minimal.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
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
