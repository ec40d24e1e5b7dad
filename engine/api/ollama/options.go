package ollama

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// Options are the "options" of /api/chat, /api/generate and /api/embed
// that Spool applies.
type Options struct {
	Sampling   turn.Sampling
	Stop       []string
	NumPredict *int
	NumCtx     *int
	// Ignored are options that change nothing here: the runner's and
	// hardware's (num_gpu, num_thread, ...: Spool plans those itself),
	// sampler settings it lacks (repeat_penalty, mirostat, ...) and
	// unknown ones.
	Ignored []string
}

// ParseOptions reads "options", answering 400 naming an option of the
// wrong type or out of range. Options it does not apply are listed in
// Ignored (Ollama too accepts unknown options with a warning).
func ParseOptions(raw json.RawMessage) (Options, error) {
	var o Options
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return o, nil
	}
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return o, apiwire.Invalid("options", "options must be a JSON object")
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
			o.Sampling.Temperature, err = number(param, v)
		case "top_p":
			o.Sampling.TopP, err = number(param, v)
		case "min_p":
			o.Sampling.MinP, err = number(param, v)
		case "presence_penalty":
			o.Sampling.PresencePenalty, err = number(param, v)
		case "frequency_penalty":
			o.Sampling.FrequencyPenalty, err = number(param, v)
		case "top_k":
			var k *int
			if k, err = integer(param, v); err == nil && *k <= 0 {
				// Ollama: 0 or less turns top-k off.
				*k = -1
			}
			o.Sampling.TopK = k
		case "seed":
			var n *int
			if n, err = integer(param, v); err == nil {
				o.Sampling.Seed = new(int64(*n))
			}
		case "num_predict":
			// 0 or less is no limit (-2 "fill the context" too), as
			// Ollama reads it: its runner bounds only a positive one.
			o.NumPredict, err = integer(param, v)
		case "num_ctx":
			if o.NumCtx, err = integer(param, v); err == nil && *o.NumCtx < 1 {
				err = apiwire.Invalid(param, "%s must be at least 1, got %d", param, *o.NumCtx)
			}
		case "stop":
			var list []string
			if json.Unmarshal(v, &list) != nil {
				err = apiwire.Invalid(param, "%s must be an array of strings", param)
			} else {
				o.Stop, err = turn.CheckStops(param, list)
			}
		default:
			o.Ignored = append(o.Ignored, k)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

func number(param string, v json.RawMessage) (*float64, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || math.IsNaN(f) {
		return nil, apiwire.Invalid(param, "%s must be a number, got %s", param, v)
	}
	return &f, nil
}

func integer(param string, v json.RawMessage) (*int, error) {
	f, err := number(param, v)
	if err != nil {
		return nil, err
	}
	if *f != math.Trunc(*f) || math.Abs(*f) > 1<<53 {
		return nil, apiwire.Invalid(param, "%s must be an integer, got %s", param, v)
	}
	n := int(*f)
	return &n, nil
}
