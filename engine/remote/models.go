package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Model is one model the remote serves.
type Model struct {
	ID      string `json:"id"`
	OwnedBy string `json:"owned_by,omitempty"`
	Created int64  `json:"created,omitempty"`
	// Root is the checkpoint behind a served name (vLLM's root).
	Root string `json:"root,omitempty"`
	// ContextLength is the remote's context in tokens: vLLM's
	// max_model_len, or context_length; 0 when the remote does not say.
	ContextLength int `json:"context_length,omitempty"`
	// Raw is the entry as the remote served it.
	Raw json.RawMessage `json:"-"`
}

// ParseModels reads a /v1/models answer: {"data": [{"id": ...}, ...]}.
func ParseModels(body []byte) ([]Model, error) {
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || list.Data == nil {
		return nil, &Error{Kind: KindProtocol, Message: "the remote engine's /v1/models answer is not a model list"}
	}
	out := make([]Model, 0, len(list.Data))
	for i, raw := range list.Data {
		var m struct {
			ID            string `json:"id"`
			OwnedBy       string `json:"owned_by"`
			Created       int64  `json:"created"`
			Root          string `json:"root"`
			MaxModelLen   int    `json:"max_model_len"`
			ContextLength int    `json:"context_length"`
		}
		if err := json.Unmarshal(raw, &m); err != nil || m.ID == "" {
			return nil, &Error{Kind: KindProtocol, Message: fmt.Sprintf("the remote engine's /v1/models entry %d has no id", i)}
		}
		ctx := m.MaxModelLen
		if ctx <= 0 {
			ctx = m.ContextLength
		}
		out = append(out, Model{ID: m.ID, OwnedBy: m.OwnedBy, Created: m.Created, Root: m.Root, ContextLength: max(ctx, 0), Raw: raw})
	}
	return out, nil
}

// Models asks the remote for its models and remembers them.
func (c *Client) Models(ctx context.Context) ([]Model, error) {
	resp, err := c.Do(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil {
		return nil, err
	}
	body, err := readBody(resp, false) // parsed and dropped here
	if err != nil {
		return nil, err
	}
	models, err := ParseModels(body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.status.Models = models
	c.mu.Unlock()
	return models, nil
}

// Resolve picks the remote model a request names: the id itself when the
// remote serves it; the remote's first model when id is empty or one of
// defaults (Spool's own names, or a name the caller maps, such as a
// Claude model). ok is false when the remote does not serve id. The
// remembered list is used when there is one; else the remote is asked.
func (c *Client) Resolve(ctx context.Context, id string, isDefault func(string) bool) (model string, ok bool, err error) {
	c.mu.Lock()
	models := c.status.Models
	c.mu.Unlock()
	wantsDefault := id == "" || isDefault(id)
	if len(models) == 0 || (!wantsDefault && !serves(models, id)) {
		// The list may have changed (a server restarted with another
		// model): ask again before refusing.
		if models, err = c.Models(ctx); err != nil {
			return "", false, err
		}
	}
	if serves(models, id) {
		return id, true, nil
	}
	if wantsDefault {
		if len(models) == 0 {
			return "", false, &Error{Kind: KindProtocol, Message: fmt.Sprintf("the remote engine at %s serves no models", c.Endpoint())}
		}
		return models[0].ID, true, nil
	}
	return "", false, nil
}

func serves(models []Model, id string) bool {
	for _, m := range models {
		if m.ID == id {
			return true
		}
	}
	return false
}
