package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// completionRequest is a legacy /v1/completions request: raw text in, no
// chat template.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Suffix        string          `json:"suffix"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens *int `json:"max_tokens"`
	samplingParams
	Stop     json.RawMessage `json:"stop"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
	N        *int            `json:"n"`
	BestOf   *int            `json:"best_of"`
}

// completionMaxTokens is OpenAI's default max_tokens for completions.
const completionMaxTokens = 16

// promptTokens reads "prompt": a string, an array of one string, an array
// of token ids, or an array of one such array.
func (s *Server) promptTokens(raw json.RawMessage) ([]int, string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, "", invalid("prompt", "prompt is required")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return s.local.Tokenizer().Encode(text), text, nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil {
		if len(texts) != 1 {
			return nil, "", invalid("prompt", "prompt must hold exactly one string (batches of prompts are not supported)")
		}
		return s.local.Tokenizer().Encode(texts[0]), texts[0], nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err != nil {
		var batch [][]int
		if err := json.Unmarshal(raw, &batch); err != nil || len(batch) != 1 {
			return nil, "", invalid("prompt", "prompt must be a string, an array of one string, or an array of token ids")
		}
		ids = batch[0]
	}
	vocab := s.local.ModelConfig().VocabSize
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return nil, "", invalid("prompt", "prompt token id %d is outside the vocabulary (0..%d)", id, vocab-1)
		}
	}
	return ids, s.local.Tokenizer().Decode(ids, false), nil
}

// completionTurn validates a completion request and translates it into a
// turn; echo is the prompt's text when the request echoes it.
func (s *Server) completionTurn(req *completionRequest) (*turn.Request, string, error) {
	if err := s.checkModel(req.Model, false); err != nil {
		return nil, "", err
	}
	if req.N != nil && *req.N != 1 {
		return nil, "", invalid("n", "n must be 1: one choice per request is supported")
	}
	if req.BestOf != nil && *req.BestOf != 1 {
		return nil, "", invalid("best_of", "best_of must be 1")
	}
	if req.Suffix != "" {
		return nil, "", invalid("suffix", "suffix (fill-in-the-middle) is not supported by this model")
	}
	prompt, text, err := s.promptTokens(req.Prompt)
	if err != nil {
		return nil, "", err
	}
	if len(prompt) == 0 {
		return nil, "", invalid("prompt", "prompt is empty")
	}
	t := &turn.Request{ID: newID("cmpl-"), Model: req.Model, Prompt: &turn.Prompt{Tokens: prompt}, Sampling: req.sampling(), Stream: req.Stream}
	if t.Stops, err = parseStop("stop", req.Stop); err != nil {
		return nil, "", err
	}
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > 5 {
			return nil, "", invalid("logprobs", "logprobs %d is out of range (0..5)", *req.Logprobs)
		}
		t.Logprobs, t.TopLogprobs = true, *req.Logprobs
	}
	limit := req.MaxTokens
	if limit == nil {
		limit = new(completionMaxTokens)
	}
	if t.MaxTokens, err = maxTokens("max_tokens", limit); err != nil {
		return nil, "", err
	}
	echo := ""
	if req.Echo {
		echo = text
	}
	return t, echo, nil
}

type completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []completionChoice `json:"choices"`
	Usage             *chatUsage         `json:"usage,omitempty"`
}

type completionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func completionLogprobsOf(toks []turn.Token, offset int) *completionLogprobs {
	lp := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, tk := range toks {
		lp.Tokens = append(lp.Tokens, tk.Text)
		lp.TokenLogprobs = append(lp.TokenLogprobs, tk.Logprob)
		top := map[string]float64{}
		for _, alt := range tk.Top {
			top[alt.Text] = alt.Logprob
		}
		lp.TopLogprobs = append(lp.TopLogprobs, top)
		lp.TextOffset = append(lp.TextOffset, offset)
		offset += len(tk.Text)
	}
	return lp
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	var echo string
	var logprobs bool
	st, ok := startTurn(s, w, r, &req, func(req *completionRequest) (t *turn.Request, err error) {
		t, echo, err = s.completionTurn(req)
		if t != nil {
			logprobs = t.Logprobs
		}
		return t, err
	})
	if !ok {
		return
	}
	created := time.Now().Unix()
	object := func(text string, finish *string, lp *completionLogprobs) completion {
		return completion{ID: st.ID(), Object: "text_completion", Created: created, Model: s.cfg.ModelID, SystemFingerprint: "spool",
			Choices: []completionChoice{{Text: text, Logprobs: lp, FinishReason: finish}}}
	}
	if !req.Stream {
		rep, ok := s.generateReply(w, r, st)
		if !ok {
			return
		}
		var lp *completionLogprobs
		if logprobs {
			lp = completionLogprobsOf(rep.Tokens, len(echo))
		}
		c := object(echo+rep.Text, &rep.End.Finish, lp)
		c.Usage = chatUsageOf(rep.End.Usage)
		writeJSON(w, http.StatusOK, c)
		return
	}
	sse, err := apiwire.StartSSE(w)
	if err != nil {
		st.Close()
		return
	}
	offset := 0
	if echo != "" {
		if sse.Data(object(echo, nil, nil)) != nil {
			st.Close()
			return
		}
		offset = len(echo)
	}
	end, err := s.generate(r.Context(), st, func(p turn.Piece) error {
		var lp *completionLogprobs
		if logprobs {
			lp = completionLogprobsOf(p.Tokens, offset)
		}
		offset += len(p.Text)
		if p.Text == "" && lp == nil {
			return nil
		}
		return sse.Data(object(p.Text, nil, lp))
	}, func() error { return sse.Comment("keep-alive") })
	if err != nil {
		if r.Context().Err() == nil {
			sse.Data(asAPIError(err).OpenAI())
		}
		return
	}
	if sse.Data(object("", &end.Finish, nil)) != nil {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		c := object("", nil, nil)
		c.Choices = []completionChoice{}
		c.Usage = chatUsageOf(end.Usage)
		if sse.Data(c) != nil {
			return
		}
	}
	sse.Done()
}
