package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/scheduler"
)

// decodeBody decodes a JSON object request body into v, answering clear
// 400s (naming the field) and 413 for an oversized body.
func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return apiwire.BodyError(err)
	}
	return decodeJSON(body, v)
}

// decodeJSON decodes one JSON object (apiwire.DecodeJSON).
func decodeJSON(body []byte, v any) error { return apiwire.DecodeJSON(body, v) }

// samplingParams are the sampling fields the endpoints share.
type samplingParams struct {
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	TopK             *int               `json:"top_k"`
	MinP             *float64           `json:"min_p"`
	Seed             *int64             `json:"seed"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
}

// applySampling puts the parameters into req over the model's
// generation_config defaults (generate.SamplingFor) and checks them
// against generate's ranges, the one set every API shares.
func (s *Server) applySampling(p samplingParams, req *scheduler.Request) error {
	cfg := s.eng.Scheduler.Model().Config()
	smp := generate.SamplingFor(cfg.Generation)
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&smp.Temperature, p.Temperature)
	set(&smp.TopP, p.TopP)
	set(&smp.MinP, p.MinP)
	if k := p.TopK; k != nil {
		switch {
		case *k == -1: // OpenAI-compatible servers' "no limit"
			smp.TopK = 0
		case *k < 0:
			return invalid("top_k", "top_k %d must be positive (or -1 for no limit)", *k)
		default:
			smp.TopK = *k
		}
	}
	if p.Seed != nil {
		smp.Seed = uint64(*p.Seed)
	} else {
		smp.Seed = mrand.Uint64()
	}
	req.Sampling = smp
	set(&req.PresencePenalty, p.PresencePenalty)
	set(&req.FrequencyPenalty, p.FrequencyPenalty)
	if len(p.LogitBias) > 0 {
		req.LogitBias = make(map[int]float64, len(p.LogitBias))
		for k, b := range p.LogitBias {
			id, err := strconv.Atoi(k)
			if err != nil || id < 0 || id >= cfg.VocabSize {
				return invalid("logit_bias", "logit_bias key %q is not a token id of this model (0..%d)", k, cfg.VocabSize-1)
			}
			req.LogitBias[id] = b
		}
	}
	if err := req.ValidateSampling(cfg.VocabSize); err != nil {
		var pe *generate.ParamError
		if errors.As(err, &pe) {
			return invalid(pe.Param, "%s", pe.Msg)
		}
		return invalid("", "%v", err)
	}
	return nil
}

// maxStops bounds the stop strings of one request.
const maxStops = 16

// parseStop reads "stop": a string or an array of strings.
func parseStop(param string, raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var list []string
	if raw[0] == '"' {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, invalid(param, "%s: %v", param, err)
		}
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid(param, "%s must be a string or an array of strings", param)
	}
	return checkStops(param, list)
}

func checkStops(param string, list []string) ([]string, error) {
	if len(list) > maxStops {
		return nil, invalid(param, "%s has %d strings; at most %d are allowed", param, len(list), maxStops)
	}
	for _, s := range list {
		if s == "" {
			return nil, invalid(param, "%s must not contain an empty string", param)
		}
	}
	return list, nil
}

// maxTokens resolves the output limit: the request's, the server's cap and
// the context left after the prompt (a request asking for more is clamped).
func (s *Server) maxTokens(param string, requested *int, promptLen int) (int, error) {
	ctx := s.eng.Scheduler.Config().ContextLength
	if promptLen > ctx {
		return 0, contextExceeded(promptLen, ctx)
	}
	limit := max(ctx-promptLen, 1)
	if s.cfg.MaxTokens > 0 {
		limit = min(limit, s.cfg.MaxTokens)
	}
	if requested == nil {
		return limit, nil
	}
	if *requested <= 0 {
		return 0, invalid(param, "%s must be at least 1, got %d", param, *requested)
	}
	return min(*requested, limit), nil
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string { return apiwire.NewID(prefix) }

// engineUsage is Spool's per-request report appended to every usage
// object: the lane (single or batched) and timings.
type engineUsage struct {
	Lane           string  `json:"lane"`
	PeakBatch      int     `json:"peak_batch"`
	QueueMS        float64 `json:"queue_ms"`
	PrefillMS      float64 `json:"prefill_ms"`
	DecodeMS       float64 `json:"decode_ms"`
	DraftsProposed int     `json:"mtp_drafts_proposed"`
	DraftsAccepted int     `json:"mtp_drafts_accepted"`
}

func engineUsageOf(r *scheduler.Result) engineUsage {
	if r == nil {
		return engineUsage{}
	}
	return engineUsage{
		Lane: r.Lane, PeakBatch: r.PeakBatch,
		QueueMS: ms(r.QueueWait), PrefillMS: ms(r.PrefillTime), DecodeMS: ms(r.DecodeTime),
		DraftsProposed: r.DraftsProposed, DraftsAccepted: r.DraftsAccepted,
	}
}

// validName reports whether a tool or schema name is 1..64 characters of
// [A-Za-z0-9_.-].
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == ""
}

// checkParam wraps a message with the parameter it is about.
func checkParam(param string, err error) error {
	if err == nil {
		return nil
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return invalid(param, "%s: %v", param, err)
}

// noteDropped notes, in the log, a request's tools (or options) that
// were left out because the model cannot use them: what names the
// endpoint, and names are the client's (attribute values, quoted by the
// log's handler; never part of the message).
func (s *Server) noteDropped(ctx context.Context, what string, names []string) {
	s.log.LogAttrs(ctx, slog.LevelInfo, "left out what the model cannot use", slog.String("what", what), slog.Any("names", names))
}
