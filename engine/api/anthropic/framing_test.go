package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// recorder keeps the events written, one "name data" line each.
type recorder struct{ lines []string }

func (r *recorder) Event(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.lines = append(r.lines, name+" "+string(b))
	return nil
}

func TestMessageFraming(t *testing.T) {
	r := &recorder{}
	m, err := startMessage(r, "msg_1", "glm", map[string]int{"input_tokens": 3, "output_tokens": 0})
	if err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error { return m.Thinking("hm") },
		func() error { return m.Thinking(" ok") },
		func() error { return m.Text("Hi") },
		func() error { return m.Ping() },
		func() error { return m.StartToolUse("toolu_1", "ls") },
		func() error { return m.InputJSON(`{"a":`) },
		func() error { return m.InputJSON(`1}`) },
		func() error { return m.Finish("tool_use", nil, map[string]int{"output_tokens": 9}) },
		m.End,
	}
	for i, f := range steps {
		if err := f(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := []string{
		`message_start {"message":{"content":[],"id":"msg_1","model":"glm","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"input_tokens":3,"output_tokens":0}},"type":"message_start"}`,
		`content_block_start {"content_block":{"signature":"","thinking":"","type":"thinking"},"index":0,"type":"content_block_start"}`,
		`content_block_delta {"delta":{"thinking":"hm","type":"thinking_delta"},"index":0,"type":"content_block_delta"}`,
		`content_block_delta {"delta":{"thinking":" ok","type":"thinking_delta"},"index":0,"type":"content_block_delta"}`,
		`content_block_stop {"index":0,"type":"content_block_stop"}`,
		`content_block_start {"content_block":{"text":"","type":"text"},"index":1,"type":"content_block_start"}`,
		`content_block_delta {"delta":{"text":"Hi","type":"text_delta"},"index":1,"type":"content_block_delta"}`,
		`ping {"type":"ping"}`,
		`content_block_stop {"index":1,"type":"content_block_stop"}`,
		`content_block_start {"content_block":{"id":"toolu_1","input":{},"name":"ls","type":"tool_use"},"index":2,"type":"content_block_start"}`,
		`content_block_delta {"delta":{"partial_json":"{\"a\":","type":"input_json_delta"},"index":2,"type":"content_block_delta"}`,
		`content_block_delta {"delta":{"partial_json":"1}","type":"input_json_delta"},"index":2,"type":"content_block_delta"}`,
		`content_block_stop {"index":2,"type":"content_block_stop"}`,
		`message_delta {"delta":{"stop_reason":"tool_use","stop_sequence":null},"type":"message_delta","usage":{"output_tokens":9}}`,
		`message_stop {"type":"message_stop"}`,
	}
	if got := strings.Join(r.lines, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

func TestEmptyReplyGetsOneTextBlock(t *testing.T) {
	r := &recorder{}
	m, _ := startMessage(r, "msg_2", "glm", nil)
	seq := "END"
	if err := m.Finish("stop_sequence", &seq, nil); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(r.lines[1:], "\n")
	want := strings.Join([]string{
		`content_block_start {"content_block":{"text":"","type":"text"},"index":0,"type":"content_block_start"}`,
		`content_block_stop {"index":0,"type":"content_block_stop"}`,
		`message_delta {"delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"type":"message_delta","usage":null}`,
	}, "\n")
	if got != want {
		t.Fatalf("events:\n%s\nwant:\n%s", got, want)
	}
}

// failing fails its nth write.
type failing struct{ n int }

func (f *failing) Event(string, any) error {
	if f.n--; f.n == 0 {
		return fmt.Errorf("client gone")
	}
	return nil
}

func TestWriteErrorsReachTheCaller(t *testing.T) {
	m, err := startMessage(&failing{n: 3}, "msg_3", "glm", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Text("a"); err == nil { // block start, then the failing delta
		t.Fatal("a failed write was not reported")
	}
}

func Example() {
	r := &recorder{}
	m, _ := startMessage(r, "msg_1", "glm52-mini", map[string]int{"input_tokens": 5})
	m.Text("Hello")
	m.Finish("end_turn", nil, map[string]int{"output_tokens": 1})
	m.End()
	for _, l := range r.lines {
		fmt.Println(strings.SplitN(l, " ", 2)[0])
	}
	// Output:
	// message_start
	// content_block_start
	// content_block_delta
	// content_block_stop
	// message_delta
	// message_stop
}
