package server

import (
	"context"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/api/ollama"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/local"
	"github.com/spoolhq/spool/engine/turn"
)

// Ollama's native API (engine/api/ollama): the server checks the model
// name, runs the turns and the embeddings, and answers in Ollama's words.

// ollamaModelName resolves a model name of Ollama's API: the served ids,
// with or without the ":latest" tag. Ollama answers 404 for an unknown
// model, with its own wording.
func (s *Server) ollamaModelName(name string) error {
	if name == "" {
		return apiwire.Invalid("model", "model is required")
	}
	if s.checkModel(name, false) != nil {
		return apiwire.NotFound("model_not_found", "model %q not found; this server serves %q", name, s.cfg.ModelID)
	}
	return nil
}

// ollamaServed is what the listings say of the served model.
func (s *Server) ollamaServed() ollama.Served {
	m := ollama.Served{ID: s.cfg.ModelID, Created: time.Unix(s.created, 0), Config: s.local.ModelConfig(), Context: s.local.Context(),
		Thinking: s.local.Thinking(), DiskBytes: s.eng.Footprint.DiskBytes, MemoryBytes: s.eng.Footprint.MemoryBytes, GPUBytes: s.eng.Footprint.GPUBytes}
	if t := s.local.Template(); t != nil {
		m.Template = t.Source()
	}
	return m
}

func (s *Server) handleOllamaVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollama.Version})
}

func (s *Server) handleOllamaTags(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.ollamaServed().Tags())
}

func (s *Server) handleOllamaPS(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.ollamaServed().PS())
}

func (s *Server) handleOllamaShow(w http.ResponseWriter, r *http.Request) {
	var req ollama.NameRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.ollamaModelName(req.ModelName()); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.ollamaServed().Show())
}

// handleOllamaPull maps a pull onto what Spool has: the served model is
// already present; any other name is not downloadable here.
func (s *Server) handleOllamaPull(w http.ResponseWriter, r *http.Request) {
	var req ollama.NameRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.ollamaModelName(req.ModelName()); err != nil {
		writeError(w, r, apiwire.NotFound("model_not_found",
			"pull model manifest: %q is not a model Spool can pull: download models with the app's guided download or `spool pull`; this server serves %q",
			req.ModelName(), s.cfg.ModelID))
		return
	}
	steps := ollama.PullSteps()
	if req.Stream != nil && !*req.Stream {
		writeJSON(w, http.StatusOK, steps[len(steps)-1])
		return
	}
	nd := ollama.StartNDJSON(w)
	for _, st := range steps {
		if nd.Line(st) != nil {
			return
		}
	}
}

func (s *Server) handleOllamaChat(w http.ResponseWriter, r *http.Request) {
	var req ollama.ChatRequest
	c := &ollama.Call{Start: time.Now()}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	t, err := s.ollamaTurn(r.Context(), req.Model, c, func() (*turn.Request, error) { return req.Turn(newID("ollama-"), c) })
	if err != nil {
		writeError(w, r, err)
		return
	}
	s.ollamaAnswer(w, r, c, t, ollama.ChatAnswer(req.Model, c))
}

func (s *Server) handleOllamaGenerate(w http.ResponseWriter, r *http.Request) {
	var req ollama.GenerateRequest
	c := &ollama.Call{Start: time.Now()}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	t, err := s.ollamaTurn(r.Context(), req.Model, c, func() (*turn.Request, error) {
		return req.Turn(newID("ollama-"), s.local.ModelConfig().VocabSize, c)
	})
	if err != nil {
		writeError(w, r, err)
		return
	}
	s.ollamaAnswer(w, r, c, t, ollama.GenerateAnswer(&req, c))
}

// ollamaTurn checks the model name and translates a request with build
// (nil without an error: a load request).
func (s *Server) ollamaTurn(ctx context.Context, model string, c *ollama.Call, build func() (*turn.Request, error)) (*turn.Request, error) {
	if err := s.ollamaModelName(model); err != nil {
		return nil, err
	}
	t, err := build()
	if len(c.Options.Ignored) > 0 {
		s.noteDropped(ctx, "Ollama options", c.Options.Ignored)
	}
	return t, err
}

// ollamaAnswer runs an Ollama turn (nil: a load request, answered done
// with done_reason "load") and answers it as a says: whole, or streamed as
// NDJSON lines.
func (s *Server) ollamaAnswer(w http.ResponseWriter, r *http.Request, c *ollama.Call, t *turn.Request, a ollama.Answer) {
	if t == nil {
		httpguard.EndParsing(r.Context())
		writeJSON(w, http.StatusOK, a.Load())
		return
	}
	st, err := s.submit(r.Context(), t)
	if err != nil {
		writeError(w, r, ollama.Error(err))
		return
	}
	if !c.Stream {
		rep, ok := s.generateReply(w, r, st)
		if ok {
			writeJSON(w, http.StatusOK, a.Reply(rep, st.Prompt()))
		}
		return
	}
	pump(r, st, a.Stream(ollama.StartNDJSON(w), st.Prompt()))
}

func (s *Server) handleOllamaEmbed(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req ollama.EmbedRequest
	e, ok := embedRequest(s, w, r, &req, func(req *ollama.EmbedRequest) ([][]int, int, error) {
		texts, err := req.Texts()
		if err != nil {
			return nil, 0, err
		}
		return s.ollamaEmbedPrepare(req, texts)
	})
	if ok {
		writeJSON(w, http.StatusOK, req.EmbedReply(e.Vectors, e.Tokens, e.Prefill, start))
	}
}

// handleOllamaEmbeddings answers the legacy /api/embeddings: one "prompt",
// one vector (an empty prompt gives an empty vector, as in Ollama).
func (s *Server) handleOllamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req ollama.EmbedRequest
	e, ok := embedRequest(s, w, r, &req, func(req *ollama.EmbedRequest) ([][]int, int, error) {
		return s.ollamaEmbedPrepare(req, req.PromptTexts())
	})
	if ok {
		writeJSON(w, http.StatusOK, ollama.EmbeddingsReply(e.Vectors))
	}
}

// ollamaEmbedPrepare checks the fields both embedding endpoints share and
// tokenizes texts: truncate (default true) cuts an input to the context,
// or to options.num_ctx when smaller.
func (s *Server) ollamaEmbedPrepare(req *ollama.EmbedRequest, texts []string) ([][]int, int, error) {
	if err := s.ollamaModelName(req.ModelName()); err != nil {
		return nil, 0, err
	}
	limit, truncate, err := req.Limit(s.local.Context())
	if err != nil {
		return nil, 0, err
	}
	dims, err := s.local.EmbedDimensions(req.Dimensions)
	if err != nil || len(texts) == 0 {
		return nil, dims, err
	}
	inputs, err := s.local.EmbedTokens(texts, local.EmbedLimits{Param: "input", Tokens: limit, Truncate: truncate})
	if tl, ok := err.(*local.InputTooLong); ok {
		return nil, 0, ollama.InputTooLong(tl.Name, tl.Limit)
	}
	return inputs, dims, err
}
