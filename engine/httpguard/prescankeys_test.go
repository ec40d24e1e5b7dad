package httpguard

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spoolhq/spool/internal/jsonvalue"

	"github.com/spoolhq/spool/engine/apiwire"
)

// messagesBody is a chat body of n messages under the key as written.
func messagesBody(key string, n int) string {
	msgs := strings.TrimSuffix(strings.Repeat(`{"role":"user","content":""},`, n), ",")
	return `{"model":"m",` + key + `:[` + msgs + `]}`
}

// The prescan sees the conversation encoding/json decodes: "Messages",
// "m\u0065ssages" and a duplicated "messages" gave it 0 messages while
// encoding/json decoded all of them.
func TestPrescanDecodedKeys(t *testing.T) {
	g := New(Config{
		Conversation: func(string) (string, int, bool) { return "messages", 256, true },
		WriteError: func(w http.ResponseWriter, r *http.Request, err error) {
			e := err.(*apiwire.Error)
			w.WriteHeader(e.Status)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message}})
		},
	})
	for _, tt := range []struct {
		name, body string
		code       string // the error code; "" for a 400 naming the duplicate
	}{
		{"capitalised", messagesBody(`"Messages"`, 257), "context_length_exceeded"},
		{"upper case", messagesBody(`"MESSAGES"`, 257), "context_length_exceeded"},
		{"escaped", messagesBody(`"m\u0065ssages"`, 257), "context_length_exceeded"},
		{"all escaped", messagesBody(`"\u006d\u0065\u0073\u0073\u0061\u0067\u0065\u0073"`, 257), "context_length_exceeded"},
		{"long s", messagesBody(`"meſſages"`, 257), "context_length_exceeded"},
		{"duplicated", `{"messages":[],` + strings.TrimPrefix(messagesBody(`"messages"`, 1000), "{"), ""},
		{"duplicated, folded", `{"messages":[],` + strings.TrimPrefix(messagesBody(`"Messages"`, 3), "{"), ""},
		{"duplicated, escaped", `{"m\u0065ssages":[],` + strings.TrimPrefix(messagesBody(`"messages"`, 3), "{"), ""},
		{"another field duplicated", `{"model":"a",` + strings.TrimPrefix(messagesBody(`"messages"`, 1), "{"), ""},
	} {
		// The json decoder agrees the body holds the messages.
		var v struct{ Messages []json.RawMessage }
		if err := json.Unmarshal([]byte(tt.body), &v); err != nil || len(v.Messages) == 0 {
			t.Fatalf("%s: encoding/json decodes %d messages, %v", tt.name, len(v.Messages), err)
		}
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		r.Body = bufferedBody{Reader: bytes.NewReader([]byte(tt.body)), data: []byte(tt.body)}
		w := httptest.NewRecorder()
		if _, ok := g.prescan(w, r); ok {
			t.Errorf("%s: the prescan let through a body encoding/json decodes as %d messages", tt.name, len(v.Messages))
			continue
		}
		var e map[string]any
		json.Unmarshal(w.Body.Bytes(), &e)
		msg, _ := jsonvalue.Lookup(e, "error", "message").(string)
		switch {
		case w.Code != http.StatusBadRequest:
			t.Errorf("%s: status %d %s", tt.name, w.Code, w.Body)
		case tt.code != "" && jsonvalue.Lookup(e, "error", "code") != tt.code:
			t.Errorf("%s: %s", tt.name, w.Body)
		case tt.code == "" && !strings.Contains(msg, "twice"):
			t.Errorf("%s: the refusal does not name the duplicate: %s", tt.name, w.Body)
		}
	}
	// A plain body under the limit passes.
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	plain := messagesBody(`"messages"`, 3)
	r.Body = bufferedBody{Reader: bytes.NewReader([]byte(plain)), data: []byte(plain)}
	if _, ok := g.prescan(httptest.NewRecorder(), r); !ok {
		t.Fatal("the prescan refused 3 messages")
	}
}

// topLevelDuplicate reports whether a valid JSON object names a top-level
// field twice as encoding/json matches names (bytes.EqualFold).
func topLevelDuplicate(body []byte) (bool, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false, false
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false, false
		}
		k := tok.(string)
		for _, seen := range keys {
			if bytes.EqualFold([]byte(seen), []byte(k)) {
				return true, true
			}
		}
		keys = append(keys, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false, false
		}
	}
	if _, err := dec.Token(); err != nil {
		return false, false
	}
	_, err := dec.Token()
	return false, err == io.EOF
}

// FuzzPrescanKeys compares the prescan with encoding/json on bodies with
// duplicates, escapes and other spellings of the key: when the prescan
// accepts a body, it counts the messages encoding/json decodes; when it
// refuses one as a duplicate, the body has one.
func FuzzPrescanKeys(f *testing.F) {
	for _, s := range []string{
		`{"messages":[1,2]}`, `{"Messages":[1,2]}`, `{"m\u0065ssages":[1]}`, `{"meſſages":[{}]}`,
		`{"messages":[],"messages":[1,2,3]}`, `{"messages":[1],"MESSAGES":[1,2]}`,
		`{"x":{"messages":[1,2]},"messages":[]}`, `{"a":"\"messages\":[1]","messages":[1]}`,
		`{"\u006d\u0065ssages":[[],{}],"model":"\u0000"}`, `{"mess\u0041ges":[1]}`, `{"messages":null}`,
		`{"messageſ":[1,2,3,4]}`, `{"model":1,"model":2,"messages":[]}`, `{"m\ud800essages":[1]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		n, ok, err := conversationLength([]byte(body), "messages", 1<<20)
		if err != nil {
			if dup, valid := topLevelDuplicate([]byte(body)); valid && !dup {
				t.Fatalf("%q: refused as a duplicate (%v); encoding/json sees none", body, err)
			}
			return
		}
		var v struct{ Messages []json.RawMessage }
		if json.Unmarshal([]byte(body), &v) != nil {
			return
		}
		if v.Messages != nil && (!ok || n != len(v.Messages)) {
			t.Fatalf("%q: scanned %d, %v; encoding/json decodes %d messages", body, n, ok, len(v.Messages))
		}
		if ok && v.Messages == nil {
			t.Fatalf("%q: scanned %d messages; encoding/json decodes none", body, n)
		}
	})
}
