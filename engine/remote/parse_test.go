package remote

import (
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseError(t *testing.T) {
	for _, tc := range []struct {
		name               string
		status             int
		body               string
		msg, typ, code, pm string
	}{
		{"vllm", 400, `{"object":"error","message":"This model's maximum context length is 8 tokens.","type":"BadRequestError","param":null,"code":400}`,
			"This model's maximum context length is 8 tokens.", "invalid_request_error", "", ""},
		{"vllm not found", 404, `{"object":"error","message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`,
			"The model `x` does not exist.", "invalid_request_error", "", ""},
		{"newer vllm", 500, `{"error":{"message":"engine dead","type":"EngineDeadError","param":null,"code":500}}`, "engine dead", "server_error", "", ""},
		{"openai", 400, `{"error":{"message":"bad","type":"invalid_request_error","param":"temperature","code":"bad_param"}}`, "bad", "invalid_request_error", "bad_param", "temperature"},
		{"vllm key", 401, `{"error":"Unauthorized"}`, "Unauthorized", "authentication_error", "", ""},
		{"fastapi", 404, `{"detail":"Not Found"}`, "Not Found", "invalid_request_error", "", ""},
		{"fastapi validation", 422, `{"detail":[{"loc":["body","max_tokens"],"msg":"Input should be a valid integer","type":"int_parsing"}]}`,
			"Input should be a valid integer", "invalid_request_error", "", "max_tokens"},
		{"anthropic", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "slow down", "rate_limit_error", "", ""},
		{"html", 502, "<html>\n<body>Bad   Gateway</body></html>", "<html> <body>Bad Gateway</body></html>", "server_error", "", ""},
		{"empty", 503, "", "Service Unavailable", "server_error", "", ""},
	} {
		e := ParseError(tc.status, []byte(tc.body))
		if e.Message != tc.msg || e.Type != tc.typ || e.Code != tc.code || e.Param != tc.pm || e.Status != tc.status {
			t.Errorf("%s: %+v", tc.name, e)
		}
	}
	if !IsContextExceeded(ParseError(400, []byte(`{"object":"error","message":"This model's maximum context length is 8 tokens.","type":"BadRequestError","code":400}`))) {
		t.Error("vLLM's context error not recognized")
	}
	if IsContextExceeded(ParseError(400, []byte(`{"error":{"message":"temperature must be positive"}}`))) {
		t.Error("a plain 400 taken for a context error")
	}
}

func FuzzParseError(f *testing.F) {
	for _, s := range []string{`{"object":"error","message":"m","type":"BadRequestError","code":400}`, `{"error":"x"}`, `{"detail":[{"msg":"a","loc":[1]}]}`, `<html>`, "\xff\xfe", `{"error":{"message":1}}`} {
		f.Add(400, []byte(s))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := ParseError(status, body)
		if e.Message == "" && status >= 100 && status < 600 && strings.TrimSpace(string(body)) != "" {
			t.Fatalf("no message for %q", body)
		}
		if !utf8.ValidString(e.Message) && !utf8.Valid(body) {
			return
		}
		if len(e.Message) > 400 && !strings.HasPrefix(strings.TrimSpace(string(body)), "{") {
			t.Fatalf("a long message from a non-JSON body: %d bytes", len(e.Message))
		}
	})
}

func readAll(t *testing.T, in string) ([]Event, error) {
	t.Helper()
	er := NewEventReader(strings.NewReader(in))
	var out []Event
	for {
		ev, err := er.Next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}

func TestEventReader(t *testing.T) {
	in := ": keep-alive\n\n" +
		"data: {\"a\":1}\n\n" +
		"\n\n" +
		"event: response.created\r\ndata: {\"b\":2}\r\n\r\n" +
		"data: line1\ndata:line2\nid: 7\n\n" +
		"data: [DONE]\n\n"
	evs, err := readAll(t, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5 {
		t.Fatalf("%d events: %q", len(evs), evs)
	}
	if evs[0].Data != nil || evs[0].Name != "" || string(evs[0].Raw) != ": keep-alive\n\n" {
		t.Errorf("comment %q", evs[0].Raw)
	}
	if string(evs[1].Data) != `{"a":1}` || string(evs[1].Raw) != "data: {\"a\":1}\n\n" {
		t.Errorf("data %q %q", evs[1].Data, evs[1].Raw)
	}
	if evs[2].Name != "response.created" || string(evs[2].Data) != `{"b":2}` {
		t.Errorf("named %+v", evs[2])
	}
	if string(evs[3].Data) != "line1\nline2" {
		t.Errorf("multi-line %q", evs[3].Data)
	}
	if !evs[4].Done() {
		t.Errorf("done %q", evs[4].Data)
	}
	var joined strings.Builder
	for _, e := range evs {
		joined.Write(e.Raw)
	}
	if strings.ReplaceAll(in, "\n\n\n\n", "\n\n") != joined.String() {
		t.Errorf("raw bytes differ:\n%q\n%q", in, joined.String())
	}
}

func TestEventReaderEnds(t *testing.T) {
	evs, err := readAll(t, "data: {\"a\":1}\n\ndata: [DONE]\n")
	if err != nil || len(evs) != 2 || !evs[1].Done() || string(evs[1].Raw) != "data: [DONE]\n\n" {
		t.Fatalf("an unterminated last event: %q %v", evs, err)
	}
	if _, err := readAll(t, "data: {\"a\":1}\n\ndata: {\"b\""); !errors.Is(err, ErrTruncated) {
		t.Fatalf("a cut line: %v", err)
	}
	long := "data: " + strings.Repeat("x", MaxEvent) + "\n\n"
	if _, err := readAll(t, long); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("an oversized event: %v", err)
	}
	big := "data: " + strings.Repeat("y", 200<<10) + "\n\n"
	if evs, err := readAll(t, big); err != nil || len(evs) != 1 || len(evs[0].Data) != 200<<10 {
		t.Fatalf("a long event: %v", err)
	}
}

func FuzzEventReader(f *testing.F) {
	for _, s := range []string{"data: {}\n\n", ": c\n\nevent: x\ndata: 1\n\n", "data: [DONE]", "\r\n\r\n", "data: a\r\ndata: b\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		er := NewEventReader(strings.NewReader(in))
		total := 0
		for i := 0; i < len(in)+2; i++ {
			ev, err := er.Next()
			if err != nil {
				return
			}
			total += len(ev.Raw)
			if total > len(in)+2*(i+1) {
				t.Fatalf("raw bytes grew past the input: %d > %d", total, len(in))
			}
		}
		t.Fatal("more events than bytes")
	})
}

func TestParseModels(t *testing.T) {
	ms, err := ParseModels([]byte(`{"object":"list","data":[{"id":"glm-5.2-fp8","object":"model","owned_by":"vllm","root":"zai-org/GLM-5.2-FP8","max_model_len":1048576},{"id":"spool","context_length":4096}]}`))
	if err != nil || len(ms) != 2 || ms[0].ContextLength != 1048576 || ms[0].Root != "zai-org/GLM-5.2-FP8" || ms[1].ContextLength != 4096 {
		t.Fatalf("%+v %v", ms, err)
	}
	for _, bad := range []string{`{}`, `[]`, `{"data":[{"object":"model"}]}`, `not json`} {
		if _, err := ParseModels([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestContextOverflow(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want Overflow
		ok   bool
	}{
		{"This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens. Please reduce the length of the input messages.", Overflow{32768, 40000}, true},
		{"'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length is 32768 tokens and your request has 29000 input tokens (4096 > 32768 - 29000).", Overflow{32768, 29000}, true},
		{"This model's maximum context length is 32768 tokens. However, you requested 1007838 tokens (7838 in the messages, 1000000 in the completion). Please reduce the length of the messages or completion.", Overflow{32768, 7838}, true},
		{"This model's maximum context length is 8 tokens.", Overflow{}, false},
		{"temperature must be positive", Overflow{}, false},
	} {
		got, ok := ContextOverflow(&Error{Kind: KindStatus, Status: 400, Message: tc.msg})
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %+v %v", tc.msg, got, ok)
		}
	}
}
