package server

import (
	"net/http"

	"github.com/spoolhq/spool/engine/access"
	"github.com/spoolhq/spool/engine/api/openai"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/local"
)

// Embeddings (/v1/embeddings, Ollama's /api/embed and /api/embeddings):
// the vectors are the local engine's (local.Engine.Embed); the requests
// and answers are engine/api/openai's and engine/api/ollama's.

// embedRequest decodes an embedding request into req, prepares its
// inputs and their dimensions with prepare and embeds them; ok is false
// when it has answered an error (or the client left).
func embedRequest[R any](s *Server, w http.ResponseWriter, r *http.Request, req *R, prepare func(*R) ([][]int, int, error)) (*local.Embedded, bool) {
	if err := decodeBody(r, req); err != nil {
		writeError(w, r, err)
		return nil, false
	}
	inputs, dims, err := prepare(req)
	if err != nil {
		writeError(w, r, err)
		return nil, false
	}
	httpguard.EndParsing(r.Context())
	var e *local.Embedded
	// A stopping server waits for the embedding, and cuts it with an
	// answer at the end of the grace period (withStop).
	withStop(func(s *Server, w http.ResponseWriter, r *http.Request) {
		if e, err = s.local.Embed(r.Context(), inputs, dims); err != nil {
			if !gone(r) {
				writeError(w, r, err)
			}
			return
		}
		access.From(r.Context()).SetTokens(s.cfg.ModelID, e.Tokens, 0, "")
	})(s, w, r)
	return e, err == nil && e != nil
}

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req openai.EmbeddingsRequest
	e, ok := embedRequest(s, w, r, &req, s.embeddingsInputs)
	if ok {
		writeJSON(w, http.StatusOK, req.Reply(s.cfg.ModelID, e.Vectors, e.Tokens))
	}
}

// embeddingsInputs checks an /v1/embeddings request and tokenizes its
// inputs; it returns them and the vectors' dimensions.
func (s *Server) embeddingsInputs(req *openai.EmbeddingsRequest) ([][]int, int, error) {
	if err := s.checkModel(req.Model, false); err != nil {
		return nil, 0, err
	}
	if err := req.Check(); err != nil {
		return nil, 0, err
	}
	dims, err := s.local.EmbedDimensions(req.Dimensions)
	if err != nil {
		return nil, 0, err
	}
	limit := s.local.Context()
	texts, ids, err := req.Inputs(s.local.ModelConfig().VocabSize, limit)
	if err != nil || texts == nil {
		return ids, dims, err
	}
	ids, err = s.local.EmbedTokens(texts, local.EmbedLimits{Param: "input", Tokens: limit})
	if tl, ok := err.(*local.InputTooLong); ok {
		return nil, 0, openai.InputTooLong("input", tl.Name, tl.Tokens, tl.Limit)
	}
	return ids, dims, err
}
