package standin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// chatAnswer is what the stand-in answers a conversation with.
type chatAnswer struct {
	reasoning []string
	words     []string
	calls     []toolCall
	finish    string
	stop      any // vLLM's stop_reason: the stop string that matched, or nil
	prompt    int
}

type toolCall struct {
	id, name string
	// fragments are the arguments as streamed; joined they are the JSON.
	fragments []string
}

func (c toolCall) arguments() string { return strings.Join(c.fragments, "") }

// answerChat scripts the answer to a chat request.
func (s *Server) answerChat(body map[string]any) (chatAnswer, script, error) {
	msgs, _ := body["messages"].([]any)
	var a chatAnswer
	var lastRole, lastText string
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		role, _ := mm["role"].(string)
		text := contentText(mm["content"])
		a.prompt += wordCount(text) + 4
		lastRole, lastText = role, text
	}
	sc := parseScript(lastText)
	if lastRole == "" {
		return a, sc, fmt.Errorf("messages must not be empty")
	}
	if err := s.checkLength(body, a.prompt); err != nil {
		return a, sc, err
	}
	tools, _ := body["tools"].([]any)
	choice := body["tool_choice"]
	switch {
	case lastRole == "tool":
		a.words = strings.Fields("The tool said: " + lastText)
	case len(tools) > 0 && choice != "none":
		forced := ""
		if cm, ok := choice.(map[string]any); ok {
			fn, _ := cm["function"].(map[string]any)
			forced, _ = fn["name"].(string)
		}
		n := 1
		if sc.twoTools {
			n = 2
		}
		for i := range n {
			t := tools[min(i, len(tools)-1)]
			if forced != "" {
				t = toolNamed(tools, forced)
			}
			a.calls = append(a.calls, callFor(t))
		}
		a.finish = "tool_calls"
	default:
		a.words = strings.Fields("You said: " + sc.text)
	}
	if sc.think {
		a.reasoning = strings.Fields("Let me think about that.")
	}
	if a.finish == "" {
		a.finish = "stop"
		if stops := stopStrings(body["stop"]); len(stops) > 0 {
			full := strings.Join(a.words, " ")
			for _, st := range stops {
				if i := strings.Index(full, st); i >= 0 {
					a.words = strings.Fields(full[:i])
					a.stop = st
					break
				}
			}
		}
		if limit, ok := body["max_tokens"].(float64); ok && int(limit) < len(a.words) {
			a.words = a.words[:int(limit)]
			a.finish = "length"
		}
	}
	return a, sc, nil
}

// checkLength refuses a request over the context as vLLM does.
func (s *Server) checkLength(body map[string]any, prompt int) error {
	want := 0
	if v, ok := body["max_tokens"].(float64); ok {
		want = int(v)
	}
	switch {
	case prompt >= s.opts.MaxModelLen:
		return fmt.Errorf("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.",
			s.opts.MaxModelLen, prompt)
	case prompt+want > s.opts.MaxModelLen:
		return fmt.Errorf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
			want, s.opts.MaxModelLen, prompt, want, s.opts.MaxModelLen, prompt)
	}
	return nil
}

func contentText(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, p := range v {
			if pm, ok := p.(map[string]any); ok {
				if t, ok := pm["text"].(string); ok {
					b.WriteString(t)
				}
			}
		}
		return b.String()
	}
	return ""
}

func stopStrings(v any) []string {
	switch s := v.(type) {
	case string:
		return []string{s}
	case []any:
		var out []string
		for _, x := range s {
			if t, ok := x.(string); ok {
				out = append(out, t)
			}
		}
		return out
	}
	return nil
}

func toolNamed(tools []any, name string) any {
	for _, t := range tools {
		tm, _ := t.(map[string]any)
		fn, _ := tm["function"].(map[string]any)
		if fn["name"] == name {
			return t
		}
	}
	return tools[0]
}

// callFor builds a call of tool t: its required (else all) properties
// filled by type, the arguments split in three or more fragments.
func callFor(t any) toolCall {
	tm, _ := t.(map[string]any)
	fn, _ := tm["function"].(map[string]any)
	name, _ := fn["name"].(string)
	params, _ := fn["parameters"].(map[string]any)
	props, _ := params["properties"].(map[string]any)
	var keys []string
	if req, ok := params["required"].([]any); ok && len(req) > 0 {
		for _, k := range req {
			if ks, ok := k.(string); ok {
				keys = append(keys, ks)
			}
		}
	} else {
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
	}
	args := map[string]any{}
	for _, k := range keys {
		p, _ := props[k].(map[string]any)
		switch p["type"] {
		case "integer", "number":
			args[k] = 3
		case "boolean":
			args[k] = true
		case "array":
			args[k] = []any{}
		case "object":
			args[k] = map[string]any{}
		default:
			args[k] = "Paris"
		}
	}
	raw, _ := json.Marshal(args)
	js := string(raw)
	// vLLM's parsers stream the arguments in pieces.
	third := max(len(js)/3, 1)
	var frags []string
	for len(js) > third {
		frags = append(frags, js[:third])
		js = js[third:]
	}
	frags = append(frags, js)
	return toolCall{id: newID("chatcmpl-tool-"), name: name, fragments: frags}
}

func (a chatAnswer) completionTokens() int {
	n := len(a.reasoning) + len(a.words)
	for _, c := range a.calls {
		n += len(c.fragments) + 1
	}
	return n
}

func (a chatAnswer) usage() map[string]any {
	c := a.completionTokens()
	return map[string]any{"prompt_tokens": a.prompt, "completion_tokens": c, "total_tokens": a.prompt + c, "prompt_tokens_details": nil}
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body, ok := s.record(w, r)
	if !ok {
		return
	}
	a, sc, err := s.answerChat(body)
	if !s.prelude(w, r, body, sc) {
		return
	}
	if err != nil {
		vllmError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	end := s.begin()
	ctx := r.Context()
	id, created := newID("chatcmpl-"), time.Now().Unix()
	if stream, _ := body["stream"].(bool); !stream {
		if sc.stall {
			stallUntilGone(ctx)
			end(ctx, false)
			return
		}
		msg := map[string]any{"role": "assistant", "content": strings.Join(a.words, " "), "tool_calls": []any{}}
		if len(a.reasoning) > 0 {
			msg["reasoning"] = strings.Join(a.reasoning, " ")
		}
		if len(a.calls) > 0 {
			msg["content"] = nil
			var calls []any
			for _, c := range a.calls {
				calls = append(calls, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.arguments()}})
			}
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": s.opts.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": a.finish, "stop_reason": a.stop}},
			"usage":   a.usage(),
		})
		end(ctx, true)
		return
	}
	out := startSSE(w)
	out.comments = sc.comments
	chunk := func(delta map[string]any, finish, stop any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": s.opts.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish, "stop_reason": stop}}}
	}
	deltas := []map[string]any{{"role": "assistant", "content": ""}}
	for _, t := range a.reasoning {
		deltas = append(deltas, map[string]any{"reasoning": t + " "})
	}
	for i, t := range a.words {
		if i > 0 {
			t = " " + t
		}
		deltas = append(deltas, map[string]any{"content": t})
	}
	for i, c := range a.calls {
		deltas = append(deltas, map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": ""}}}})
		for _, f := range c.fragments {
			deltas = append(deltas, map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": f}}}})
		}
	}
	for i, d := range deltas {
		if i > 0 && !s.pause(ctx) {
			end(ctx, false)
			return
		}
		out.data(chunk(d, nil, nil))
		if i == 1 || len(deltas) == 1 {
			if sc.streamError {
				out.data(map[string]any{"object": "error", "message": "stand-in failure mid-stream", "type": "InternalServerError", "param": nil, "code": 500})
				out.done()
				end(ctx, true)
				return
			}
			if s.interrupt(ctx, sc, end) {
				return
			}
		}
	}
	out.data(chunk(map[string]any{}, a.finish, a.stop))
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] == true {
		out.data(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": s.opts.Model, "choices": []any{}, "usage": a.usage()})
	}
	out.done()
	end(ctx, true)
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := s.record(w, r)
	if !ok {
		return
	}
	prompt, _ := body["prompt"].(string)
	sc := parseScript(prompt)
	if !s.prelude(w, r, body, sc) {
		return
	}
	a := chatAnswer{words: strings.Fields("You said: " + sc.text), finish: "stop", prompt: wordCount(prompt)}
	if err := s.checkLength(body, a.prompt); err != nil {
		vllmError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	if limit, ok := body["max_tokens"].(float64); ok && int(limit) < len(a.words) {
		a.words, a.finish = a.words[:int(limit)], "length"
	}
	end := s.begin()
	ctx := r.Context()
	id, created := newID("cmpl-"), time.Now().Unix()
	choice := func(text string, finish any) []any {
		return []any{map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": finish, "stop_reason": nil}}
	}
	if stream, _ := body["stream"].(bool); !stream {
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "text_completion", "created": created, "model": s.opts.Model,
			"choices": choice(strings.Join(a.words, " "), a.finish), "usage": a.usage()})
		end(ctx, true)
		return
	}
	out := startSSE(w)
	for i, t := range a.words {
		if i > 0 {
			t = " " + t
			if !s.pause(ctx) {
				end(ctx, false)
				return
			}
		}
		out.data(map[string]any{"id": id, "object": "text_completion", "created": created, "model": s.opts.Model, "choices": choice(t, nil)})
		if s.interrupt(ctx, sc, end) {
			return
		}
	}
	out.data(map[string]any{"id": id, "object": "text_completion", "created": created, "model": s.opts.Model, "choices": choice("", a.finish)})
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] == true {
		out.data(map[string]any{"id": id, "object": "text_completion", "created": created, "model": s.opts.Model, "choices": []any{}, "usage": a.usage()})
	}
	out.done()
	end(ctx, true)
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	body, ok := s.record(w, r)
	if !ok {
		return
	}
	var text string
	switch in := body["input"].(type) {
	case string:
		text = in
	case []any:
		if len(in) > 0 {
			last, _ := in[len(in)-1].(map[string]any)
			text = contentText(last["content"])
		}
	}
	sc := parseScript(text)
	if !s.prelude(w, r, body, sc) {
		return
	}
	end := s.begin()
	ctx := r.Context()
	words := strings.Fields("You said: " + sc.text)
	id, msgID := newID("resp_"), newID("msg_")
	usage := map[string]any{"input_tokens": wordCount(text), "output_tokens": len(words), "total_tokens": wordCount(text) + len(words)}
	resp := func(status string, out []any, u any) map[string]any {
		return map[string]any{"id": id, "object": "response", "created_at": time.Now().Unix(), "model": s.opts.Model,
			"status": status, "output": out, "usage": u}
	}
	message := []any{map[string]any{"type": "message", "id": msgID, "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": strings.Join(words, " "), "annotations": []any{}}}}}
	final := resp("completed", message, usage)
	s.mu.Lock()
	s.responses[id] = final
	s.mu.Unlock()
	if stream, _ := body["stream"].(bool); !stream {
		writeJSON(w, http.StatusOK, final)
		end(ctx, true)
		return
	}
	out := startSSE(w)
	seq := 0
	ev := func(name string, v map[string]any) {
		v["type"], v["sequence_number"] = name, seq
		seq++
		out.event(name, v)
	}
	ev("response.created", map[string]any{"response": resp("in_progress", []any{}, nil)})
	for i, t := range words {
		if i > 0 {
			t = " " + t
			if !s.pause(ctx) {
				end(ctx, false)
				return
			}
		}
		ev("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "delta": t})
		if s.interrupt(ctx, sc, end) {
			return
		}
	}
	ev("response.completed", map[string]any{"response": final})
	end(ctx, true)
}

func (s *Server) handleGetResponse(w http.ResponseWriter, r *http.Request) {
	s.record(w, r)
	s.mu.Lock()
	resp, ok := s.responses[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		vllmError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("Response with id '%s' not found.", r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := s.record(w, r)
	if !ok {
		return
	}
	n := 0
	if msgs, ok := body["messages"].([]any); ok {
		for _, m := range msgs {
			mm, _ := m.(map[string]any)
			n += wordCount(contentText(mm["content"])) + 4
		}
	} else if p, ok := body["prompt"].(string); ok {
		n = wordCount(p)
	}
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = i + 1
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": n, "max_model_len": s.opts.MaxModelLen, "tokens": tokens, "token_strs": nil})
}

// interrupt applies the stall and cut directives after a first chunk; it
// reports whether the answer ended there.
func (s *Server) interrupt(ctx context.Context, sc script, end func(context.Context, bool)) bool {
	switch {
	case sc.stall:
		stallUntilGone(ctx)
		end(ctx, false)
		return true
	case sc.cut:
		end(ctx, false)
		cutConnection()
	}
	return false
}
