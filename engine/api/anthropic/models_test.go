package anthropic

import (
	"encoding/json"
	"testing"
	"time"
)

// TestModels: a model and a page of them in Anthropic's shape; unknown
// limits are null, an empty page has [] and null ids.
func TestModels(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"model", NewModel("glm", created, 4096, 1024),
			`{"id":"glm","type":"model","display_name":"glm","created_at":"2026-01-02T02:04:05Z","max_input_tokens":4096,"max_tokens":1024,"lifecycle":"active","capabilities":null,"line":null,"deprecated_at":null,"retires_at":null}`},
		{"unknown limits", NewModel("r", created, 0, 0),
			`{"id":"r","type":"model","display_name":"r","created_at":"2026-01-02T02:04:05Z","max_input_tokens":null,"max_tokens":null,"lifecycle":"active","capabilities":null,"line":null,"deprecated_at":null,"retires_at":null}`},
		{"empty page", NewModelList(nil), `{"data":[],"has_more":false,"first_id":null,"last_id":null}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: %s %v\nwant %s", tc.name, b, err, tc.want)
		}
	}
	l := NewModelList([]Model{NewModel("a", created, 0, 0), NewModel("b", created, 0, 0)})
	if *l.FirstID != "a" || *l.LastID != "b" || l.HasMore {
		t.Errorf("page %+v", l)
	}
}
