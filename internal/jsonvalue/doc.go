// Package jsonvalue reads values decoded by encoding/json into any
// (map[string]any, []any, string, float64, bool, nil) without a chain of
// type assertions: Lookup(v, "choices", 0, "message", "content").
//
// It is for tests and tools that inspect JSON answers; it does not decode,
// validate or write JSON.
package jsonvalue
