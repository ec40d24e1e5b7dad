package openai

// Model is one entry of /v1/models, with Spool's capability fields.
type Model struct {
	ID            string `json:"id"`
	Object        string `json:"object"`
	Created       int64  `json:"created"`
	OwnedBy       string `json:"owned_by"`
	ContextLength int    `json:"context_length"`
	// MaxModelLen is the context under vLLM's name, which some clients read.
	MaxModelLen  int          `json:"max_model_len"`
	MaxOutput    int          `json:"max_output_tokens"`
	Capabilities Capabilities `json:"capabilities"`
}

// Capabilities says truthfully what the served model does and does not.
type Capabilities struct {
	Chat             bool     `json:"chat"`
	Completions      bool     `json:"completions"`
	Tools            bool     `json:"tools"`
	StructuredOutput bool     `json:"structured_output"`
	Reasoning        bool     `json:"reasoning"`
	Logprobs         bool     `json:"logprobs"`
	MTP              bool     `json:"mtp"`
	DSA              bool     `json:"dsa"`
	Embeddings       bool     `json:"embeddings"`
	Unsupported      []string `json:"unsupported"`
}

// Served is what /v1/models says of the served model.
type Served struct {
	ID      string
	Created int64
	// Context is a turn's context, MaxOutput the most tokens of a reply.
	Context, MaxOutput int
	// Template: the model has a chat template (chat, tools, reasoning);
	// Constrained: JSON formats are enforced.
	Template, Constrained bool
	MTP, DSA              bool
}

// ModelOf is the /v1/models entry of the served model.
func ModelOf(m Served) Model {
	return Model{
		ID: m.ID, Object: "model", Created: m.Created, OwnedBy: "spool",
		ContextLength: m.Context, MaxModelLen: m.Context, MaxOutput: m.MaxOutput,
		Capabilities: Capabilities{
			Chat: m.Template, Completions: true, Tools: m.Template, StructuredOutput: m.Constrained, Reasoning: m.Template,
			Logprobs: true, MTP: m.MTP, DSA: m.DSA, Embeddings: true,
			Unsupported: []string{"images", "audio", "n>1", "suffix (fill-in-the-middle)"},
		},
	}
}

// ModelList is the answer of /v1/models.
func ModelList(models ...Model) map[string]any {
	return map[string]any{"object": "list", "data": models}
}
