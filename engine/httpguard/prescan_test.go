package httpguard

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestArrayLength(t *testing.T) {
	for _, tt := range []struct {
		body string
		n    int
		ok   bool
	}{
		{`{"messages":[]}`, 0, true},
		{`{"model":"x","messages":[{"role":"user","content":"a,]}"},{"role":"user"}]}`, 2, true},
		{` { "stream" : true , "tools":[{"a":[1,2,{"b":"]"}]}], "messages" : [ 1 , "x" , null , [ ] , { } ] } `, 5, true},
		{`{"input":"just text"}`, 0, false},
		{`{"messages":{"a":1}}`, 0, false},
		{`[1,2]`, 0, false},
		{`{"a":"\"messages\":[1,2,3]","messages":[1]}`, 1, true},
		{`{"messages":[1,2`, 2, false},
	} {
		key := "messages"
		if strings.Contains(tt.body, "input") {
			key = "input"
		}
		n, ok := arrayLength([]byte(tt.body), key, 1000)
		if n != tt.n || ok != tt.ok {
			t.Errorf("%s: got %d, %v; want %d, %v", tt.body, n, ok, tt.n, tt.ok)
		}
	}
	if n, ok := arrayLength([]byte(`{"messages":[1,2,3,4,5]}`), "messages", 3); n != 3 || !ok {
		t.Errorf("stop at 3: got %d, %v", n, ok)
	}
}

// FuzzArrayLength checks the scanner against encoding/json: for a valid
// object whose messages field is an array, the count is its length.
func FuzzArrayLength(f *testing.F) {
	for _, s := range []string{`{"messages":[1,{"a":"]"},[]]}`, `{"x":1,"messages":[]}`, `{"messages":"s"}`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		n, ok := arrayLength([]byte(body), "messages", 1<<20)
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &obj) != nil {
			return
		}
		var arr []json.RawMessage
		if json.Unmarshal(obj["messages"], &arr) != nil || strings.Count(body, `"messages"`) != 1 {
			return
		}
		if !ok || n != len(arr) {
			t.Fatalf("%q: scanned %d, %v; encoding/json finds %d", body, n, ok, len(arr))
		}
	})
}
