package server

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
)

// ollamaOptions are the "options" of /api/chat and /api/generate that
// Spool applies.
type ollamaOptions struct {
	sampling   samplingParams
	stop       []string
	numPredict *int
	numCtx     *int
	// ignored are options that change nothing here: the runner's and
	// hardware's (num_gpu, num_thread, ...: Spool plans those itself),
	// sampler settings it lacks (repeat_penalty, mirostat, ...) and
	// unknown ones.
	ignored []string
}

// parseOllamaOptions reads "options", answering 400 naming an option of the
// wrong type or out of range. Options it does not apply are listed in
// ignored (Ollama too accepts unknown options with a warning).
func parseOllamaOptions(raw json.RawMessage) (ollamaOptions, error) {
	var o ollamaOptions
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return o, nil
	}
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return o, invalid("options", "options must be a JSON object")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := bytes.TrimSpace(m[k])
		if bytes.Equal(v, []byte("null")) {
			continue
		}
		param := "options." + k
		var err error
		switch k {
		case "temperature":
			o.sampling.Temperature, err = ollamaNumber(param, v)
		case "top_p":
			o.sampling.TopP, err = ollamaNumber(param, v)
		case "min_p":
			o.sampling.MinP, err = ollamaNumber(param, v)
		case "presence_penalty":
			o.sampling.PresencePenalty, err = ollamaNumber(param, v)
		case "frequency_penalty":
			o.sampling.FrequencyPenalty, err = ollamaNumber(param, v)
		case "top_k":
			var k *int
			if k, err = ollamaInt(param, v); err == nil && *k <= 0 {
				// Ollama: 0 or less turns top-k off.
				*k = -1
			}
			o.sampling.TopK = k
		case "seed":
			var n *int
			if n, err = ollamaInt(param, v); err == nil {
				o.sampling.Seed = new(int64(*n))
			}
		case "num_predict":
			// 0 or less is no limit (-2 "fill the context" too), as
			// Ollama reads it: its runner bounds only a positive one.
			o.numPredict, err = ollamaInt(param, v)
		case "num_ctx":
			if o.numCtx, err = ollamaInt(param, v); err == nil && *o.numCtx < 1 {
				err = invalid(param, "%s must be at least 1, got %d", param, *o.numCtx)
			}
		case "stop":
			var list []string
			if json.Unmarshal(v, &list) != nil {
				err = invalid(param, "%s must be an array of strings", param)
			} else {
				o.stop, err = checkStops(param, list)
			}
		default:
			o.ignored = append(o.ignored, k)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

func ollamaNumber(param string, v json.RawMessage) (*float64, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || math.IsNaN(f) {
		return nil, invalid(param, "%s must be a number, got %s", param, v)
	}
	return &f, nil
}

func ollamaInt(param string, v json.RawMessage) (*int, error) {
	f, err := ollamaNumber(param, v)
	if err != nil {
		return nil, err
	}
	if *f != math.Trunc(*f) || math.Abs(*f) > 1<<53 {
		return nil, invalid(param, "%s must be an integer, got %s", param, v)
	}
	n := int(*f)
	return &n, nil
}
