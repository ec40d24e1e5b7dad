package remotefront

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/remote"
)

// remoteUsage is a usage object in any of the shapes that pass through:
// chat and completions (prompt/completion tokens) and Responses
// (input/output tokens).
type remoteUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	InputTokens         int `json:"input_tokens"`
	OutputTokens        int `json:"output_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// counts returns prompt, cached and completion tokens.
func (u *remoteUsage) counts() (prompt, cached, completion int) {
	prompt, completion = u.PromptTokens+u.InputTokens, u.CompletionTokens+u.OutputTokens
	if d := u.PromptTokensDetails; d != nil {
		cached = d.CachedTokens
	}
	if d := u.InputTokensDetails; d != nil {
		cached += d.CachedTokens
	}
	return prompt, cached, completion
}

func (u *remoteUsage) record(call *remote.Call) {
	if u != nil {
		call.Usage(u.counts())
	}
}

// Proxy passes a request through to the remote: the body as
// sent, but for the model (resolved to one the remote serves) and, on a
// streamed chat or completion, stream_options.include_usage (so that the
// reply's figures are known; the usage chunk is dropped again when the
// client did not ask for it).
func (f *Front) Proxy(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.writeError(w, r, apiwire.BodyError(err))
		return
	}
	var fields map[string]json.RawMessage
	if err := apiwire.DecodeJSON(body, &fields); err != nil {
		f.writeError(w, r, err)
		return
	}
	var id string
	if raw, ok := fields["model"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &id) != nil {
			f.writeError(w, r, apiwire.Invalid("model", "model must be a string"))
			return
		}
	}
	model, err := f.remoteModel(r.Context(), id, false)
	if err != nil {
		f.writeError(w, r, f.apiError(err))
		return
	}
	fields["model"], _ = json.Marshal(model)
	var stream bool
	if raw, ok := fields["stream"]; ok && json.Unmarshal(raw, &stream) != nil {
		f.writeError(w, r, apiwire.Invalid("stream", "stream must be a boolean"))
		return
	}
	path := r.URL.Path
	dropUsage := false
	if stream && (path == "/v1/chat/completions" || path == "/v1/completions") {
		if dropUsage, err = forceUsage(fields); err != nil {
			f.writeError(w, r, err)
			return
		}
	}
	out, err := json.Marshal(fields)
	if err != nil {
		f.writeError(w, r, apiwire.Internal(err))
		return
	}
	f.forward(w, r, f.rc.Begin(path, model, stream), out, dropUsage)
}

// Get passes GET /v1/responses/{id} through.
func (f *Front) Get(w http.ResponseWriter, r *http.Request) {
	f.forward(w, r, f.rc.Begin(r.URL.Path, "", false), nil, false)
}

// forward sends the request (its method and path, with body) to the
// remote and passes the answer on: a stream as it arrives, else whole.
func (f *Front) forward(w http.ResponseWriter, r *http.Request, call *remote.Call, body []byte, dropUsage bool) {
	// The body is read: the next request may be parsed.
	httpguard.EndParsing(r.Context())
	resp, err := f.rc.Do(r.Context(), r.Method, r.URL.Path, body)
	if err != nil {
		f.failCall(w, r, call, err)
		return
	}
	copyRemoteHeaders(w, resp)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		f.passStream(w, r, resp, call, dropUsage)
		return
	}
	f.passBody(w, r, resp, call)
}

// failCall ends call with err and answers the error in the envelope of
// the request's path, unless the client has gone.
func (f *Front) failCall(w http.ResponseWriter, r *http.Request, call *remote.Call, err error) {
	call.End(err)
	if r.Context().Err() != nil && stopCause(r) == nil {
		return // the client left
	}
	f.writeError(w, r, f.apiError(err))
}

// forceUsage sets stream_options.include_usage; it reports whether the
// client had not asked for usage itself.
func forceUsage(fields map[string]json.RawMessage) (bool, error) {
	opts := map[string]json.RawMessage{}
	if raw, ok := fields["stream_options"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &opts) != nil {
			return false, apiwire.Invalid("stream_options", "stream_options must be an object")
		}
	}
	var had bool
	if raw, ok := opts["include_usage"]; ok {
		json.Unmarshal(raw, &had)
	}
	opts["include_usage"] = json.RawMessage("true")
	fields["stream_options"], _ = json.Marshal(opts)
	return !had, nil
}

// copyRemoteHeaders keeps the remote's request id; nothing else of its
// headers reaches the client.
func copyRemoteHeaders(w http.ResponseWriter, resp *http.Response) {
	if id := resp.Header.Get("X-Request-Id"); id != "" {
		w.Header().Set("X-Request-Id", id)
	}
}

// passBody answers with a non-streamed remote answer as it came.
func (f *Front) passBody(w http.ResponseWriter, r *http.Request, resp *http.Response, call *remote.Call) {
	data, err := remote.ReadBody(resp)
	if err != nil {
		f.failCall(w, r, call, err)
		return
	}
	call.Output()
	var u struct {
		Usage *remoteUsage `json:"usage"`
	}
	if json.Unmarshal(data, &u) == nil {
		u.Usage.record(call)
	}
	call.End(nil)
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(resp.StatusCode)
	w.Write(data)
}

// streamChunk is what passStream reads of a streamed event.
type streamChunk struct {
	Object  string `json:"object"`
	Type    string `json:"type"`
	Choices []struct {
		Delta *struct {
			Content          string            `json:"content"`
			Reasoning        string            `json:"reasoning"`
			ReasoningContent string            `json:"reasoning_content"`
			ToolCalls        []json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
		Text string `json:"text"`
	} `json:"choices"`
	Usage    *remoteUsage `json:"usage"`
	Response *struct {
		Usage *remoteUsage `json:"usage"`
	} `json:"response"`
	Error json.RawMessage `json:"error"`
}

// output reports whether the chunk carries generated output.
func (c *streamChunk) output() bool {
	for _, ch := range c.Choices {
		if ch.Text != "" {
			return true
		}
		if d := ch.Delta; d != nil && (d.Content != "" || d.Reasoning != "" || d.ReasoningContent != "" || len(d.ToolCalls) > 0) {
			return true
		}
	}
	return strings.HasSuffix(c.Type, ".delta")
}

// terminal reports a Responses event that ends a response.
func (c *streamChunk) terminal() bool {
	switch c.Type {
	case "response.completed", "response.failed", "response.incomplete":
		return true
	}
	return false
}

// passStream passes an event stream through as it arrives: event by
// event, flushed at once, with keep-alive comments while the remote is
// silent (the remote's own comments and events without data are not
// passed on). A vLLM error event is rewritten in the OpenAI error shape; a
// stream that ends early, falls silent past the remote's timeout or
// breaks ends with an error event. The client leaving closes the remote's
// stream, which ends the generation there.
func (f *Front) passStream(w http.ResponseWriter, r *http.Request, resp *http.Response, call *remote.Call, dropUsage bool) {
	st := f.rc.Stream(resp)
	defer st.Close()
	responses := r.URL.Path == "/v1/responses"
	sse, err := apiwire.StartSSE(w)
	if err != nil {
		call.End(err)
		return
	}
	tick := time.NewTicker(f.cfg.KeepAlive)
	defer tick.Stop()
	last := time.Now()
	var failure error // an error event the remote sent
	ended := false
	for {
		select {
		case <-r.Context().Done():
			if stop := stopCause(r); stop != nil {
				f.streamError(r, sse, responses, stop)
			}
			call.End(context.Canceled)
			return
		case <-tick.C:
			if time.Since(last) >= f.cfg.KeepAlive {
				if sse.Comment("keep-alive") != nil {
					call.End(context.Canceled)
					return
				}
				last = time.Now()
			}
		case ev, ok := <-st.Events():
			if !ok {
				err := st.Err()
				if err == nil && !ended {
					err = &remote.Error{Kind: remote.KindProtocol, Message: "the remote engine's stream ended before its end"}
				}
				if err != nil {
					f.streamError(r, sse, responses, err)
					call.End(err)
					return
				}
				call.End(failure)
				return
			}
			raw := ev.Raw
			if ev.Data == nil {
				// A comment or an event without data (a keep-alive, an
				// older Spool's opening comment): a spec client
				// dispatches nothing, but one that dispatches every blank
				// line (openai-go v1.x) reads an empty event and ends the
				// stream. The front's own keep-alives cover the silence.
				continue
			}
			var c streamChunk
			if d := bytes.TrimSpace(ev.Data); len(d) > 0 && d[0] == '{' && json.Unmarshal(d, &c) == nil {
				switch {
				case c.Object == "error" || (len(c.Error) > 0 && !responses):
					e := f.failed(r, f.apiError(remote.ParseError(http.StatusInternalServerError, d)))
					failure = e
					raw = sseData(e.OpenAI())
				case dropUsage && c.Usage != nil && len(c.Choices) == 0:
					c.Usage.record(call)
					raw = nil
				default:
					if c.output() {
						call.Output()
					}
					c.Usage.record(call)
					if c.Response != nil {
						c.Response.Usage.record(call)
					}
					ended = ended || c.terminal()
				}
			}
			if raw != nil {
				if sse.Write(raw) != nil {
					call.End(context.Canceled)
					return
				}
				last = time.Now()
			}
			if ev.Done() {
				call.End(failure)
				return
			}
		}
	}
}

// sseData is one "data:" event of v.
func sseData(v any) []byte {
	b, _ := json.Marshal(v)
	return append(append([]byte("data: "), b...), '\n', '\n')
}

// streamError ends a passed-through stream with an error event: the
// OpenAI shape, or the Responses "error" event.
func (f *Front) streamError(r *http.Request, sse *apiwire.SSE, responses bool, err error) {
	e := f.failed(r, f.apiError(err))
	if responses {
		sse.Event("error", map[string]any{"type": "error", "code": e.Code, "message": e.Message, "param": nil})
		return
	}
	sse.Write(sseData(e.OpenAI()))
}
