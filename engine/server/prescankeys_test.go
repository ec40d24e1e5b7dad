package server

import (
	"strings"
	"testing"
)

// TestPrescanDuplicateKeyLive: through a running server (a body let
// through is answered, not queued forever), a duplicated key answers 400
// naming it (engine/httpguard's prescankeys_test.go has the cases).
func TestPrescanDuplicateKeyLive(t *testing.T) {
	live := newTestServer(t, serverOpts{})
	status, body, _ := live.do(t, "POST", "/v1/chat/completions", `{"messages":[],"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`)
	if msg, _ := jpath(body, "error", "message").(string); status != 400 || !strings.Contains(msg, `"messages" twice`) {
		t.Fatalf("a duplicated messages field: %d %v", status, body)
	}
}
