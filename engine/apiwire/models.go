package apiwire

import (
	"net/http"
	"time"
)

// AnthropicVersionHeader is the header every request of Anthropic's SDKs
// carries; a model listing that has it answers in Anthropic's shape.
const AnthropicVersionHeader = "Anthropic-Version"

// WantsAnthropic reports whether r is an Anthropic client's (it carries
// the anthropic-version header): /v1/models, which both APIs share,
// answers it in Anthropic's shape.
func WantsAnthropic(r *http.Request) bool { return r.Header.Get(AnthropicVersionHeader) != "" }

// AnthropicModel is one model in the shape of Anthropic's Models API (its
// ModelInfo). Capabilities is null: the server does not claim Anthropic's
// catalogue of features.
type AnthropicModel struct {
	ID             string  `json:"id"`
	Type           string  `json:"type"`
	DisplayName    string  `json:"display_name"`
	CreatedAt      string  `json:"created_at"`
	MaxInputTokens *int    `json:"max_input_tokens"`
	MaxTokens      *int    `json:"max_tokens"`
	Lifecycle      string  `json:"lifecycle"`
	Capabilities   any     `json:"capabilities"`
	Line           *string `json:"line"`
	DeprecatedAt   *string `json:"deprecated_at"`
	RetiresAt      *string `json:"retires_at"`
}

// NewAnthropicModel is the model id, created at created, with its context
// (maxInput) and output limit (maxTokens); a limit of 0 is unknown (null).
func NewAnthropicModel(id string, created time.Time, maxInput, maxTokens int) AnthropicModel {
	m := AnthropicModel{ID: id, Type: "model", DisplayName: id, CreatedAt: created.UTC().Format(time.RFC3339), Lifecycle: "active"}
	if maxInput > 0 {
		m.MaxInputTokens = &maxInput
	}
	if maxTokens > 0 {
		m.MaxTokens = &maxTokens
	}
	return m
}

// AnthropicModelList is Anthropic's page of models: every model on one
// page.
type AnthropicModelList struct {
	Data    []AnthropicModel `json:"data"`
	HasMore bool             `json:"has_more"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
}

// NewAnthropicModelList is the one page of models.
func NewAnthropicModelList(models []AnthropicModel) AnthropicModelList {
	l := AnthropicModelList{Data: models}
	if l.Data == nil {
		l.Data = []AnthropicModel{}
	}
	if n := len(models); n > 0 {
		l.FirstID, l.LastID = &models[0].ID, &models[n-1].ID
	}
	return l
}

// WriteModelError answers a model listing's error e in the envelope the
// client speaks: Anthropic's for an Anthropic client (WantsAnthropic),
// else the path's.
func WriteModelError(w http.ResponseWriter, r *http.Request, e *Error) {
	if !WantsAnthropic(r) {
		WriteError(w, r.URL.Path, e)
		return
	}
	WriteJSON(w, e.Status, e.Anthropic())
}
