package jsonvalue

import (
	"encoding/json"
	"testing"
)

func TestLookup(t *testing.T) {
	var v any
	if err := json.Unmarshal([]byte(`{"choices":[{"message":{"content":"hi","n":2}}],"ok":true,"none":null}`), &v); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		keys []any
		want any
	}{
		{"nested", []any{"choices", 0, "message", "content"}, "hi"},
		{"number", []any{"choices", 0, "message", "n"}, 2.0},
		{"top level", []any{"ok"}, true},
		{"no keys", nil, v},
		{"null", []any{"none"}, nil},
		{"missing key", []any{"nope", "x"}, nil},
		{"index past the end", []any{"choices", 1}, nil},
		{"negative index", []any{"choices", -1}, nil},
		{"index into an object", []any{0}, nil},
		{"key into an array", []any{"choices", "message"}, nil},
		{"key of another type", []any{1.5}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Lookup(v, tt.keys...)
			if tt.name == "no keys" {
				if _, ok := got.(map[string]any); !ok {
					t.Fatalf("Lookup(v) = %v, want v itself", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("Lookup(%v) = %v, want %v", tt.keys, got, tt.want)
			}
		})
	}
}
