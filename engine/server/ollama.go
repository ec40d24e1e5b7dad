package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
)

// Ollama's native API (/api/...) beside the OpenAI and Anthropic ones, for
// editors whose "Ollama" provider discovers models with /api/tags and
// /api/show and chats over /api/chat (VS Code Copilot, Continue, Zed, Open
// WebUI, the ollama client libraries). It is a translation only: chat and
// generate build the same turn as /v1/chat/completions (template, grammar,
// limits, prompt cache, scheduler) and read it with the same generate loop.
//
// What differs from Ollama, by design:
//   - one model is served and stays resident for as long as the server runs:
//     keep_alive is validated and acknowledged but never unloads it, /api/ps
//     lists it with an expiry at Ollama's "forever", and an empty chat or
//     generate (Ollama's load or unload request) answers done_reason "load";
//   - num_ctx cannot grow the context past the one the memory plan fixed at
//     start (--context); a smaller num_ctx bounds prompt plus output, and a
//     prompt over it is refused, never truncated;
//   - /api/embed and /api/embeddings embed with the served model itself
//     (mean-pooled final hidden states, L2-normalised: embed.go), each
//     input a full prefill; the legacy /api/embeddings vector is normalised
//     too;
//   - /api/pull succeeds for the served model and answers 404 for any other
//     name (downloads are the app's guided download or `spool pull`);
//   - load_duration is the time before the engine started on the request
//     (parsing, template, tokenizing, the queue): the model never loads per
//     request.

// ollamaVersion is the version of Ollama's API that /api mirrors (editors
// check it against a minimum), not Spool's version.
const ollamaVersion = "0.13.0"

// ollamaModelName resolves a model name of Ollama's API: the served ids,
// with or without the ":latest" tag. Ollama answers 404 for an unknown
// model, with its own wording.
func (s *Server) ollamaModelName(name string) error {
	if name == "" {
		return invalid("model", "model is required")
	}
	if s.checkModel(strings.TrimSuffix(name, ":latest"), false) != nil {
		return notFound("model_not_found", "model %q not found; this server serves %q", name, s.cfg.ModelID)
	}
	return nil
}

// ollamaTime is Ollama's timestamp form.
func ollamaTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ollamaForever is the expiry Ollama reports for a model kept loaded
// without limit (keep_alive < 0); Spool's model is pinned.
func ollamaForever() time.Time { return time.Now().Add(time.Duration(math.MaxInt64)) }

// ollamaDetails is a model's "details" object.
type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func (s *Server) ollamaDetails() ollamaDetails {
	arch := s.ollamaArch()
	return ollamaDetails{Format: "safetensors", Family: arch, Families: []string{arch}}
}

// ollamaArch is the model_info architecture key.
func (s *Server) ollamaArch() string {
	if t := s.local.ModelConfig().ModelType; t != "" {
		return t
	}
	return "glm_moe_dsa"
}

// ollamaDigest is a stable digest of the served model's id, which Ollama's
// listings carry (clients use it as a key).
func (s *Server) ollamaDigest() string {
	var h uint64 = 14695981039346656037
	for _, c := range []byte(s.cfg.ModelID) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return fmt.Sprintf("%016x%016x%016x%016x", h, h^0x9e3779b97f4a7c15, h^0xc2b2ae3d27d4eb4f, h^0x165667b19e3779f9)
}

func (s *Server) handleOllamaVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
}

// ollamaListed is one model of /api/tags and /api/ps.
type ollamaListed struct {
	Name          string        `json:"name"`
	Model         string        `json:"model"`
	ModifiedAt    string        `json:"modified_at,omitempty"`
	Size          int64         `json:"size"`
	Digest        string        `json:"digest"`
	Details       ollamaDetails `json:"details"`
	ExpiresAt     string        `json:"expires_at,omitempty"`
	SizeVRAM      *int64        `json:"size_vram,omitempty"`
	ContextLength int           `json:"context_length,omitempty"`
}

func (s *Server) ollamaListed() ollamaListed {
	return ollamaListed{
		Name: s.cfg.ModelID, Model: s.cfg.ModelID, Digest: s.ollamaDigest(), Details: s.ollamaDetails(),
	}
}

func (s *Server) handleOllamaTags(w http.ResponseWriter, r *http.Request) {
	m := s.ollamaListed()
	m.ModifiedAt = ollamaTime(time.Unix(s.created, 0))
	m.Size = s.eng.Footprint.DiskBytes
	writeJSON(w, http.StatusOK, map[string]any{"models": []ollamaListed{m}})
}

func (s *Server) handleOllamaPS(w http.ResponseWriter, r *http.Request) {
	m := s.ollamaListed()
	m.ExpiresAt = ollamaTime(ollamaForever())
	m.Size = s.eng.Footprint.MemoryBytes
	m.SizeVRAM = new(s.eng.Footprint.GPUBytes)
	m.ContextLength = s.local.Context()
	writeJSON(w, http.StatusOK, map[string]any{"models": []ollamaListed{m}})
}

// ollamaNameRequest is the body of /api/show and /api/pull: Ollama names
// the model "model", older clients "name".
type ollamaNameRequest struct {
	Model   string `json:"model"`
	Name    string `json:"name"`
	Verbose bool   `json:"verbose"`
	Stream  *bool  `json:"stream"`
}

func (req *ollamaNameRequest) model() string { return ollamaModel(req.Model, req.Name) }

// ollamaModel is the model an Ollama request names: "model", or older
// clients' "name".
func ollamaModel(model, name string) string {
	if model != "" {
		return model
	}
	return name
}

// ollamaShow is /api/show's answer.
type ollamaShow struct {
	License      string         `json:"license"`
	Modelfile    string         `json:"modelfile"`
	Parameters   string         `json:"parameters"`
	Template     string         `json:"template"`
	Details      ollamaDetails  `json:"details"`
	ModelInfo    map[string]any `json:"model_info"`
	Capabilities []string       `json:"capabilities"`
	ModifiedAt   string         `json:"modified_at"`
}

func (s *Server) handleOllamaShow(w http.ResponseWriter, r *http.Request) {
	var req ollamaNameRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.ollamaModelName(req.model()); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.ollamaShow())
}

func (s *Server) ollamaShow() ollamaShow {
	cfg := s.local.ModelConfig()
	arch := s.ollamaArch()
	ctx := s.local.Context()
	info := map[string]any{
		"general.architecture":               arch,
		"general.basename":                   s.cfg.ModelID,
		arch + ".context_length":             ctx,
		arch + ".embedding_length":           cfg.HiddenSize,
		arch + ".block_count":                cfg.NumLayers,
		arch + ".vocab_size":                 cfg.VocabSize,
		arch + ".attention.head_count":       cfg.NumHeads,
		arch + ".expert_count":               cfg.NumRoutedExperts,
		arch + ".expert_used_count":          cfg.ExpertsPerToken,
		arch + ".feed_forward_length":        cfg.IntermediateSize,
		arch + ".expert_feed_forward_length": cfg.MoEIntermediateSize,
	}
	// As the UI's hello event: thinking where the template has its switch.
	caps := []string{"completion"}
	if s.local.Template() != nil {
		caps = append(caps, "tools")
		if s.local.Thinking() {
			caps = append(caps, "thinking")
		}
	}
	var params []string
	g := cfg.Generation
	if g.DoSample {
		if g.Temperature > 0 {
			params = append(params, fmt.Sprintf("temperature %g", g.Temperature))
		}
		if g.TopP > 0 {
			params = append(params, fmt.Sprintf("top_p %g", g.TopP))
		}
		if g.TopK > 0 {
			params = append(params, fmt.Sprintf("top_k %d", g.TopK))
		}
	}
	params = append(params, fmt.Sprintf("num_ctx %d", ctx))
	var tmpl string
	if t := s.local.Template(); t != nil {
		tmpl = t.Source()
	}
	return ollamaShow{
		Modelfile: fmt.Sprintf("# Served by Spool: the model stays resident; parameters are its defaults.\nFROM %s\n%s\n",
			s.cfg.ModelID, "PARAMETER "+strings.Join(params, "\nPARAMETER ")),
		Parameters:   strings.Join(params, "\n"),
		Template:     tmpl,
		Details:      s.ollamaDetails(),
		ModelInfo:    info,
		Capabilities: caps,
		ModifiedAt:   ollamaTime(time.Unix(s.created, 0)),
	}
}

// handleOllamaPull maps a pull onto what Spool has: the served model is
// already present (a success, as Ollama answers for a model up to date);
// any other name is not downloadable here.
func (s *Server) handleOllamaPull(w http.ResponseWriter, r *http.Request) {
	var req ollamaNameRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.ollamaModelName(req.model()); err != nil {
		writeError(w, r, notFound("model_not_found",
			"pull model manifest: %q is not a model Spool can pull: download models with the app's guided download or `spool pull`; this server serves %q",
			req.model(), s.cfg.ModelID))
		return
	}
	steps := []map[string]string{{"status": "pulling manifest"}, {"status": "verifying sha256 digest"}, {"status": "success"}}
	if req.Stream != nil && !*req.Stream {
		writeJSON(w, http.StatusOK, steps[len(steps)-1])
		return
	}
	nd := startNDJSON(w)
	for _, st := range steps {
		if nd.line(st) != nil {
			return
		}
	}
}

// ndjsonWriter writes a newline-delimited JSON stream (Ollama's).
type ndjsonWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startNDJSON commits a 200 NDJSON response and flushes the headers, so
// that clients see them before the prompt is prefilled.
func startNDJSON(w http.ResponseWriter) *ndjsonWriter {
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	nd := &ndjsonWriter{w: w, rc: http.NewResponseController(w)}
	nd.rc.Flush()
	return nd
}

// line writes v as one JSON line.
func (nd *ndjsonWriter) line(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("server: encoding a stream line: %w", err)
	}
	nd.rc.SetWriteDeadline(time.Now().Add(apiwire.SSEWriteTimeout))
	if _, err := nd.w.Write(buf.Bytes()); err != nil {
		return err
	}
	return nd.rc.Flush()
}
