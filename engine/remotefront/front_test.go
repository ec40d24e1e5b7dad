package remotefront

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/turn"
)

func TestRemoteStop(t *testing.T) {
	stops := []string{"END", "###"}
	tests := []struct {
		finish  string
		stopRaw string
		calls   bool
		reason  string
		seq     string
	}{
		{"stop", `null`, false, "stop", ""},
		{"stop", `"END"`, false, "stop", "END"},
		{"stop", `"other"`, false, "stop", ""},
		{"stop", `151336`, false, "stop", ""},
		{"length", `null`, false, "length", ""},
		{"tool_calls", `null`, false, "tool_calls", ""},
		{"stop", `null`, true, "tool_calls", ""},
		{"stop", `"END"`, true, "tool_calls", ""},
		{"length", `"END"`, false, "length", ""},
		{"tool_calls", `"###"`, false, "tool_calls", ""},
		{"", `"###"`, false, "", "###"},
	}
	for _, tt := range tests {
		finish, seq := remoteFinish(tt.finish, json.RawMessage(tt.stopRaw), stops, tt.calls)
		if finish != tt.reason || seq != tt.seq {
			t.Errorf("the stop of (%q, %s, calls %v) = %q, %q; want %q, %q", tt.finish, tt.stopRaw, tt.calls, finish, seq, tt.reason, tt.seq)
		}
	}
}

func TestUsage(t *testing.T) {
	u := &chatUsage{PromptTokens: 100, CompletionTokens: 7}
	u.PromptTokensDetails.CachedTokens = 140
	if got := usageOf(u); got != (turn.Usage{PromptTokens: 100, CachedTokens: 100, CompletionTokens: 7}) {
		t.Errorf("usageOf = %+v", got)
	}
	if got := usageOf(nil); got != (turn.Usage{}) {
		t.Errorf("usageOf(nil) = %+v", got)
	}
}

func TestWireMessagesArgumentsAsText(t *testing.T) {
	in := []chat.Message{{Role: "assistant", ToolCalls: []chat.ToolCall{
		{ID: "a", Function: chat.FunctionCall{Name: "f", Arguments: json.RawMessage(`{"x":1}`)}},
		{ID: "b", Function: chat.FunctionCall{Name: "g"}},
	}}}
	out := wireMessages(in)
	if a := out[0].ToolCalls[0].Function.Arguments; a != `{"x":1}` {
		t.Errorf("raw arguments became %#v, want the JSON text", a)
	}
	if a := out[0].ToolCalls[1].Function.Arguments; a != "{}" {
		t.Errorf("no arguments became %#v, want {}", a)
	}
	if _, ok := in[0].ToolCalls[0].Function.Arguments.(json.RawMessage); !ok {
		t.Error("wireMessages changed its input")
	}
}

func TestAPIErrorOfRemoteFailures(t *testing.T) {
	f := &Front{}
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{&remote.Error{Kind: remote.KindUnreachable, Message: "refused"}, http.StatusBadGateway, "remote_unreachable"},
		{&remote.Error{Kind: remote.KindTimeout, Message: "slow"}, http.StatusGatewayTimeout, "remote_timeout"},
		{&remote.Error{Kind: remote.KindAuth, Message: "key"}, http.StatusBadGateway, "remote_auth_failed"},
		{&remote.Error{Kind: remote.KindProtocol, Message: "garbled"}, http.StatusBadGateway, "remote_protocol_error"},
		{&remote.Error{Kind: remote.KindStatus, Status: http.StatusInternalServerError, Message: "boom"}, http.StatusBadGateway, "remote_error"},
		{&remote.Error{Kind: remote.KindStatus, Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "bad", Message: "no"}, http.StatusBadRequest, "bad"},
		{errors.New("local"), http.StatusInternalServerError, "internal_error"},
	}
	for _, tt := range tests {
		e := f.apiError(tt.err)
		if e.Status != tt.status || e.Code != tt.code {
			t.Errorf("apiError(%v) = %d %q, want %d %q", tt.err, e.Status, e.Code, tt.status, tt.code)
		}
	}
}

func TestNewNeedsItsConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without a client: no error")
	}
}
