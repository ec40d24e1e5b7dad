package anthropic

import "time"

// Model is one model in the shape of Anthropic's Models API (its
// ModelInfo). Capabilities is null: the server does not claim Anthropic's
// catalogue of features.
type Model struct {
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

// NewModel is the model id, created at created, with its context
// (maxInput) and output limit (maxTokens); a limit of 0 is unknown (null).
func NewModel(id string, created time.Time, maxInput, maxTokens int) Model {
	m := Model{ID: id, Type: "model", DisplayName: id, CreatedAt: created.UTC().Format(time.RFC3339), Lifecycle: "active"}
	if maxInput > 0 {
		m.MaxInputTokens = &maxInput
	}
	if maxTokens > 0 {
		m.MaxTokens = &maxTokens
	}
	return m
}

// ModelList is Anthropic's page of models: every model on one
// page.
type ModelList struct {
	Data    []Model `json:"data"`
	HasMore bool    `json:"has_more"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
}

// NewModelList is the one page of models.
func NewModelList(models []Model) ModelList {
	l := ModelList{Data: models}
	if l.Data == nil {
		l.Data = []Model{}
	}
	if n := len(models); n > 0 {
		l.FirstID, l.LastID = &models[0].ID, &models[n-1].ID
	}
	return l
}
