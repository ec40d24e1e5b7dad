package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"github.com/spoolhq/spool/engine/api/ollama"
	"github.com/spoolhq/spool/engine/api/openai"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/scheduler"
)

// postInto posts a JSON body and decodes the answer into out (float32
// vectors decode exactly), returning the status and the raw body.
func (ts *testServer) postInto(t *testing.T, path string, body any, out any) (int, string) {
	t.Helper()
	resp := ts.post(t, context.Background(), path, body)
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(got, out); err != nil {
			t.Fatalf("%s: decoding %s: %v", path, got, err)
		}
	}
	return resp.StatusCode, string(got)
}

type ollamaEmbedAnswer struct {
	Model           string      `json:"model"`
	Embeddings      [][]float32 `json:"embeddings"`
	TotalDuration   int64       `json:"total_duration"`
	LoadDuration    int64       `json:"load_duration"`
	PromptEvalCount int         `json:"prompt_eval_count"`
}

type openAIEmbedAnswer struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func (a *openAIEmbedAnswer) vector(t *testing.T, i int) []float32 {
	t.Helper()
	var v []float32
	if err := json.Unmarshal(a.Data[i].Embedding, &v); err == nil {
		return v
	}
	var s string
	if err := json.Unmarshal(a.Data[i].Embedding, &s); err != nil {
		t.Fatalf("embedding %d is %s", i, a.Data[i].Embedding)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("embedding %d: base64 %q: %v", i, s, err)
	}
	v = make([]float32, len(b)/4)
	for j := range v {
		v[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
	}
	return v
}

func unitNorm(t *testing.T, v []float32) {
	t.Helper()
	var sq float64
	for _, x := range v {
		sq += float64(x) * float64(x)
	}
	if math.Abs(math.Sqrt(sq)-1) > 1e-5 {
		t.Errorf("|v| = %v, want 1", math.Sqrt(sq))
	}
}

// TestEmbedEndpoints: Ollama's /api/embed and /api/embeddings and OpenAI's
// /v1/embeddings answer the served model's pooled vectors, of its hidden
// size and unit norm; the same text gives the same bits alone, in a batch,
// as token ids, base64-encoded and on every endpoint.
func TestEmbedEndpoints(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{APIKey: "k"}})
	hidden := ts.sched.Model().Config().HiddenSize
	texts := []string{"hello world", "The quick brown fox jumps over the lazy dog.", "hello world"}

	var single ollamaEmbedAnswer
	if status, body := ts.postInto(t, "/api/embed", map[string]any{"model": "glm52-mini", "input": texts[0]}, &single); status != 200 {
		t.Fatalf("/api/embed: %d %s", status, body)
	}
	want := single.Embeddings[0]
	if len(single.Embeddings) != 1 || len(want) != hidden || single.Model != "glm52-mini" {
		t.Fatalf("/api/embed: %d vectors of %d values for %q, want 1 of %d", len(single.Embeddings), len(want), single.Model, hidden)
	}
	unitNorm(t, want)
	ids := ts.srv.eng.Tokenizer.Encode(texts[0])
	if single.PromptEvalCount != len(ids) || single.TotalDuration <= 0 {
		t.Errorf("prompt_eval_count %d (want %d), total_duration %d", single.PromptEvalCount, len(ids), single.TotalDuration)
	}

	var batch ollamaEmbedAnswer
	if status, body := ts.postInto(t, "/api/embed", map[string]any{"model": "glm52-mini:latest", "input": texts, "keep_alive": "5m", "truncate": true}, &batch); status != 200 {
		t.Fatalf("/api/embed batch: %d %s", status, body)
	}
	if len(batch.Embeddings) != len(texts) {
		t.Fatalf("batch: %d vectors, want %d", len(batch.Embeddings), len(texts))
	}
	for i, v := range batch.Embeddings {
		if len(v) != hidden {
			t.Fatalf("batch vector %d has %d values", i, len(v))
		}
		unitNorm(t, v)
	}
	if !slices.Equal(batch.Embeddings[0], want) || !slices.Equal(batch.Embeddings[2], want) {
		t.Error("a text embedded in a batch differs from the same text alone")
	}
	if slices.Equal(batch.Embeddings[1], want) {
		t.Error("different texts gave the same vector")
	}

	var legacy struct {
		Embedding []float32 `json:"embedding"`
	}
	if status, body := ts.postInto(t, "/api/embeddings", map[string]any{"model": "glm52-mini", "prompt": texts[0]}, &legacy); status != 200 || !slices.Equal(legacy.Embedding, want) {
		t.Errorf("/api/embeddings: %d %.200s: equal %v", status, body, slices.Equal(legacy.Embedding, want))
	}

	for _, c := range []map[string]any{
		{"model": "glm52-mini", "input": texts[0]},
		{"input": []string{texts[0]}, "encoding_format": "float"},
		{"input": ids},
		{"input": [][]int{ids, ids}},
		{"input": texts[0], "encoding_format": "base64"},
	} {
		var ans openAIEmbedAnswer
		if status, body := ts.postInto(t, "/v1/embeddings", c, &ans); status != 200 {
			t.Fatalf("/v1/embeddings %v: %d %s", c, status, body)
		}
		if ans.Object != "list" || len(ans.Data) == 0 || ans.Usage.PromptTokens != len(ids)*len(ans.Data) || ans.Usage.TotalTokens != ans.Usage.PromptTokens {
			t.Errorf("/v1/embeddings %v: object %q, %d data, usage %+v", c, ans.Object, len(ans.Data), ans.Usage)
		}
		for i := range ans.Data {
			if ans.Data[i].Object != "embedding" || ans.Data[i].Index != i || !slices.Equal(ans.vector(t, i), want) {
				t.Errorf("/v1/embeddings %v: datum %d (%s, index %d) differs from /api/embed's vector", c, i, ans.Data[i].Object, ans.Data[i].Index)
			}
		}
	}

	// dimensions cuts the vector and renormalises it.
	var cut ollamaEmbedAnswer
	if status, body := ts.postInto(t, "/api/embed", map[string]any{"model": "glm52-mini", "input": texts[0], "dimensions": 16}, &cut); status != 200 || len(cut.Embeddings[0]) != 16 {
		t.Fatalf("dimensions 16: %d %.200s", status, body)
	}
	unitNorm(t, cut.Embeddings[0])

	// A missing or empty input embeds nothing (Ollama's load request).
	for _, req := range []map[string]any{{"model": "glm52-mini"}, {"model": "glm52-mini", "input": []string{}}} {
		var none ollamaEmbedAnswer
		if status, body := ts.postInto(t, "/api/embed", req, &none); status != 200 || none.Embeddings == nil || len(none.Embeddings) != 0 {
			t.Errorf("%v: %d %s", req, status, body)
		}
	}
}

// TestEmbedBesideDecodingChat: an embedding computed while a chat decodes
// (sharing its forwards) is the bits of the same embedding alone, and it
// does not wait for the chat to end.
func TestEmbedBesideDecodingChat(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	body := map[string]any{"model": "glm52-mini", "input": "embeddings beside a chat"}
	var alone ollamaEmbedAnswer
	if status, raw := ts.postInto(t, "/api/embed", body, &alone); status != 200 {
		t.Fatalf("alone: %d %s", status, raw)
	}
	// A chat that decodes until cancelled: no stop tokens, the whole context.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chat, err := ts.sched.Submit(ctx, scheduler.Request{Prompt: ts.srv.eng.Tokenizer.Encode("Once upon a time"),
		Params: generate.Params{MaxTokens: ts.sched.Config().ContextLength}})
	if err != nil {
		t.Fatal(err)
	}
	if toks, res, err := chat.Next(context.Background()); err != nil || res != nil || len(toks) == 0 {
		t.Fatalf("chat's first read: %d tokens, result %v, err %v", len(toks), res, err)
	}
	var beside ollamaEmbedAnswer
	if status, raw := ts.postInto(t, "/api/embed", body, &beside); status != 200 {
		t.Fatalf("beside a chat: %d %s", status, raw)
	}
	last := ts.sched.Stats().LastRequest
	cancel()
	res := drainStream(context.Background(), chat)
	if res == nil || res.FinishReason != scheduler.FinishCancelled {
		t.Fatalf("the chat ended before it was cancelled (%+v): the embedding did not run beside it", res)
	}
	if last == nil || last.Lane != scheduler.LaneBatched || len(last.Embedding) == 0 {
		t.Errorf("the embedding's lane: %+v, want batched", last)
	}
	if !slices.Equal(beside.Embeddings[0], alone.Embeddings[0]) {
		t.Error("the embedding beside a decoding chat differs from the same embedding alone")
	}
}

// TestEmbedRefusals: bad embedding requests get a 4xx naming the problem,
// in each API's error shape; truncate (Ollama's default) cuts a long input
// to the context or num_ctx.
func TestEmbedRefusals(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: schedulerConfig{ContextLength: 64}})
	long := strings.Repeat("many words make a long input ", 40)
	for _, c := range []struct {
		path   string
		body   any
		status int
		want   string
	}{
		{"/api/embed", map[string]any{"model": "bge-m3", "input": "x"}, 404, "not found; this server serves"},
		{"/api/embed", map[string]any{"input": "x"}, 400, "model is required"},
		{"/api/embed", map[string]any{"model": "glm52-mini", "input": 5}, 400, "invalid input type"},
		{"/api/embed", map[string]any{"model": "glm52-mini", "input": []any{"x", 5}}, 400, "invalid input type"},
		{"/api/embed", map[string]any{"model": "glm52-mini", "input": []string{"x", ""}}, 400, "input[1] is empty"},
		{"/api/embed", map[string]any{"model": "glm52-mini", "input": long, "truncate": false}, 400, "exceeds the context length"},
		{"/api/embed", map[string]any{"model": "glm52-mini", "input": "x", "dimensions": 100000}, 400, "dimensions 100000 is out of range"},
		{"/api/embed", map[string]any{"model": "glm52-mini", "input": "x", "dimensions": -1}, 400, "dimensions -1"},
		{"/api/embed", map[string]any{"model": "glm52-mini", "input": "x", "keep_alive": "soon"}, 400, "keep_alive"},
		{"/api/embed", map[string]any{"model": "glm52-mini", "input": "x", "options": map[string]any{"num_ctx": "big"}}, 400, "options.num_ctx"},
		{"/api/embed", map[string]any{"model": "glm52-mini", "input": make([]string, openai.MaxEmbedInputs+1)}, 400, "input has 2049 items, more than the 2048"},
		{"/api/embeddings", map[string]any{"model": "nope", "prompt": "x"}, 404, "not found"},
		{"/api/embeddings", map[string]any{"model": "glm52-mini", "prompt": 3}, 400, "prompt"},
		{"/v1/embeddings", map[string]any{"model": "gpt-9", "input": "x"}, 404, "model_not_found"},
		{"/v1/embeddings", map[string]any{"input": ""}, 400, "input is empty"},
		{"/v1/embeddings", map[string]any{}, 400, "input is required"},
		{"/v1/embeddings", map[string]any{"input": []string{}}, 400, "empty array"},
		{"/v1/embeddings", map[string]any{"input": []any{"x", 1}}, 400, "input must be"},
		{"/v1/embeddings", map[string]any{"input": [][]int{{1}, {}}}, 400, "input[1] is empty"},
		{"/v1/embeddings", map[string]any{"input": []int{1, 1 << 30}}, 400, "outside the vocabulary"},
		{"/v1/embeddings", map[string]any{"input": long}, 400, "context_length_exceeded"},
		{"/v1/embeddings", map[string]any{"input": "x", "encoding_format": "hex"}, 400, "encoding_format"},
		{"/v1/embeddings", map[string]any{"input": make([]string, openai.MaxEmbedInputs+1)}, 400, "more than the 2048"},
	} {
		status, body := ts.postInto(t, c.path, c.body, nil)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s %v: %d %s, want %d %q", c.path, c.body, status, body, c.status, c.want)
		}
		if strings.HasPrefix(c.path, "/api/") && !strings.HasPrefix(body, `{"error":"`) {
			t.Errorf("%s: %s is not Ollama's error shape", c.path, body)
		}
	}

	// truncate (the default) cuts to the context, or to a smaller num_ctx.
	for _, c := range []struct {
		body map[string]any
		want int
	}{
		{map[string]any{"model": "glm52-mini", "input": long}, 64},
		{map[string]any{"model": "glm52-mini", "input": []string{long, "x"}, "truncate": true, "options": map[string]any{"num_ctx": 8}}, 8 + len(ts.srv.eng.Tokenizer.Encode("x"))},
	} {
		var ans ollamaEmbedAnswer
		if status, body := ts.postInto(t, "/api/embed", c.body, &ans); status != 200 || ans.PromptEvalCount != c.want {
			t.Errorf("truncated %v: %d %.200s: prompt_eval_count %d, want %d", c.body["options"], status, body, ans.PromptEvalCount, c.want)
		}
	}
	// The truncated input embeds as its first tokens do.
	ids := ts.srv.eng.Tokenizer.Encode(long)[:64]
	var direct openAIEmbedAnswer
	ts.postInto(t, "/v1/embeddings", map[string]any{"input": ids}, &direct)
	var trunc ollamaEmbedAnswer
	ts.postInto(t, "/api/embed", map[string]any{"model": "glm52-mini", "input": long}, &trunc)
	if len(direct.Data) != 1 || len(trunc.Embeddings) != 1 || !slices.Equal(direct.vector(t, 0), trunc.Embeddings[0]) {
		t.Error("a truncated input's vector differs from its first tokens' vector")
	}
}

func FuzzEmbedRequest(f *testing.F) {
	fuzzDecode(f, []string{
		`{"model":"glm52-mini","input":"hello"}`,
		`{"model":"glm52-mini:latest","input":["a","b"],"truncate":false,"dimensions":8,"keep_alive":"5m","options":{"num_ctx":16}}`,
		`{"name":"glm52-mini","prompt":"legacy","options":{"temperature":0.5}}`,
		`{"model":"glm52-mini","input":[""],"dimensions":-3}`,
	}, func(s *Server, body []byte) error {
		var req ollama.EmbedRequest
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
		texts, err := req.Texts()
		if err != nil {
			return err
		}
		if req.Prompt != nil {
			texts = append(texts, *req.Prompt)
		}
		_, _, err = s.ollamaEmbedPrepare(&req, texts)
		return err
	})
}

func FuzzEmbeddingsRequest(f *testing.F) {
	fuzzDecode(f, []string{
		`{"model":"glm52-mini","input":"hello"}`,
		`{"input":["a","b"],"encoding_format":"base64","dimensions":4}`,
		`{"input":[1,2,3]}`,
		`{"input":[[1,2],[3]],"user":"u"}`,
		`{"input":[[-1]],"encoding_format":"hex"}`,
	}, func(s *Server, body []byte) error {
		var req openai.EmbeddingsRequest
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
		_, _, err := s.embeddingsInputs(&req)
		return err
	})
}

// drainStream waits for a cancelled stream's result.
func drainStream(ctx context.Context, st *scheduler.Stream) *scheduler.Result {
	for {
		_, res, err := st.Next(ctx)
		if err != nil || res != nil {
			return res
		}
	}
}
