package ollama

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spoolhq/spool/engine/config"
)

// Ollama's native API (/api/...) beside the OpenAI and Anthropic ones, for
// editors whose "Ollama" provider discovers models with /api/tags and
// /api/show and chats over /api/chat (VS Code Copilot, Continue, Zed, Open
// WebUI, the ollama client libraries). It is a translation only: chat and
// generate are turns like /v1/chat/completions' (template, grammar, limits,
// prompt cache, scheduler).
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
//     (mean-pooled final hidden states, L2-normalised), each input a full
//     prefill; the legacy /api/embeddings vector is normalised too;
//   - /api/pull succeeds for the served model and answers 404 for any other
//     name (downloads are the app's guided download or `spool pull`);
//   - load_duration is the time before the engine started on the request
//     (parsing, template, tokenizing, the queue): the model never loads per
//     request.

// Version is the version of Ollama's API that /api mirrors (editors check
// it against a minimum), not Spool's version.
const Version = "0.13.0"

// Served is what the listings say of the served model.
type Served struct {
	// ID is its name; Created when the server started.
	ID      string
	Created time.Time
	Config  *config.Config
	// Context is a turn's context.
	Context int
	// Template is the chat template's source ("" without one); Thinking
	// says it has a thinking switch.
	Template string
	Thinking bool
	// DiskBytes are its weight files, MemoryBytes the memory it is
	// planned to use and GPUBytes those of it on a GPU.
	DiskBytes, MemoryBytes, GPUBytes int64
}

// Details is a model's "details" object.
type Details struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func (m Served) details() Details {
	arch := m.arch()
	return Details{Format: "safetensors", Family: arch, Families: []string{arch}}
}

// arch is the model_info architecture key.
func (m Served) arch() string {
	if t := m.Config.ModelType; t != "" {
		return t
	}
	return "glm_moe_dsa"
}

// digest is a stable digest of the served model's id, which Ollama's
// listings carry (clients use it as a key).
func (m Served) digest() string {
	var h uint64 = 14695981039346656037
	for _, c := range []byte(m.ID) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return fmt.Sprintf("%016x%016x%016x%016x", h, h^0x9e3779b97f4a7c15, h^0xc2b2ae3d27d4eb4f, h^0x165667b19e3779f9)
}

// Listed is one model of /api/tags and /api/ps.
type Listed struct {
	Name          string  `json:"name"`
	Model         string  `json:"model"`
	ModifiedAt    string  `json:"modified_at,omitempty"`
	Size          int64   `json:"size"`
	Digest        string  `json:"digest"`
	Details       Details `json:"details"`
	ExpiresAt     string  `json:"expires_at,omitempty"`
	SizeVRAM      *int64  `json:"size_vram,omitempty"`
	ContextLength int     `json:"context_length,omitempty"`
}

func (m Served) listed() Listed {
	return Listed{Name: m.ID, Model: m.ID, Digest: m.digest(), Details: m.details()}
}

// Tags is /api/tags' answer: the model, sized by its weight files.
func (m Served) Tags() map[string]any {
	l := m.listed()
	l.ModifiedAt = Time(m.Created)
	l.Size = m.DiskBytes
	return map[string]any{"models": []Listed{l}}
}

// forever is the expiry Ollama reports for a model kept loaded without
// limit (keep_alive < 0); Spool's model is pinned.
func forever() time.Time { return time.Now().Add(time.Duration(math.MaxInt64)) }

// PS is /api/ps' answer: the model, sized by its planned memory, loaded
// for ever.
func (m Served) PS() map[string]any {
	l := m.listed()
	l.ExpiresAt = Time(forever())
	l.Size = m.MemoryBytes
	l.SizeVRAM = new(m.GPUBytes)
	l.ContextLength = m.Context
	return map[string]any{"models": []Listed{l}}
}

// NameRequest is the body of /api/show and /api/pull: Ollama names the
// model "model", older clients "name".
type NameRequest struct {
	Model   string `json:"model"`
	Name    string `json:"name"`
	Verbose bool   `json:"verbose"`
	Stream  *bool  `json:"stream"`
}

// ModelName is the model the request names.
func (r *NameRequest) ModelName() string { return modelName(r.Model, r.Name) }

// modelName is the model an Ollama request names: "model", or older
// clients' "name".
func modelName(model, name string) string {
	if model != "" {
		return model
	}
	return name
}

// Show is /api/show's answer.
type Show struct {
	License      string         `json:"license"`
	Modelfile    string         `json:"modelfile"`
	Parameters   string         `json:"parameters"`
	Template     string         `json:"template"`
	Details      Details        `json:"details"`
	ModelInfo    map[string]any `json:"model_info"`
	Capabilities []string       `json:"capabilities"`
	ModifiedAt   string         `json:"modified_at"`
}

// Show is /api/show's answer for the model.
func (m Served) Show() Show {
	cfg := m.Config
	arch := m.arch()
	info := map[string]any{
		"general.architecture":               arch,
		"general.basename":                   m.ID,
		arch + ".context_length":             m.Context,
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
	if m.Template != "" {
		caps = append(caps, "tools")
		if m.Thinking {
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
	params = append(params, fmt.Sprintf("num_ctx %d", m.Context))
	return Show{
		Modelfile: fmt.Sprintf("# Served by Spool: the model stays resident; parameters are its defaults.\nFROM %s\n%s\n",
			m.ID, "PARAMETER "+strings.Join(params, "\nPARAMETER ")),
		Parameters:   strings.Join(params, "\n"),
		Template:     m.Template,
		Details:      m.details(),
		ModelInfo:    info,
		Capabilities: caps,
		ModifiedAt:   Time(m.Created),
	}
}

// PullSteps are a pull's progress lines for the served model: it is
// already present (a success, as Ollama answers for a model up to date).
func PullSteps() []map[string]string {
	return []map[string]string{{"status": "pulling manifest"}, {"status": "verifying sha256 digest"}, {"status": "success"}}
}
