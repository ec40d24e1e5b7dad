package remote_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/remote/standin"
)

func standinClient(t *testing.T, o standin.Options) *remote.Client {
	t.Helper()
	ts := httptest.NewServer(standin.New(o))
	t.Cleanup(ts.Close)
	c, err := remote.New(remote.Config{URL: ts.URL, Key: o.Key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestProbeAndResolve(t *testing.T) {
	c := standinClient(t, standin.Options{Key: "k-123456"})
	if st := c.Status(); st.Reachable || st.CheckedAt != nil {
		t.Fatalf("before a probe: %+v", st)
	}
	st := c.Probe(context.Background())
	if !st.Reachable || st.CheckedAt == nil || st.LatencyMS <= 0 || len(st.Models) != 1 || st.Models[0].ContextLength != 131072 {
		t.Fatalf("after a probe: %+v", st)
	}
	isSpool := func(id string) bool { return id == "spool" }
	for _, tc := range []struct {
		id, want string
		ok       bool
	}{{"", "glm-5.2-fp8", true}, {"spool", "glm-5.2-fp8", true}, {"glm-5.2-fp8", "glm-5.2-fp8", true}, {"gpt-9", "", false}} {
		got, ok, err := c.Resolve(context.Background(), tc.id, isSpool)
		if err != nil || got != tc.want || ok != tc.ok {
			t.Errorf("Resolve(%q) = %q, %v, %v", tc.id, got, ok, err)
		}
	}
}

func TestProbeWrongKey(t *testing.T) {
	ts := httptest.NewServer(standin.New(standin.Options{Key: "right-key"}))
	defer ts.Close()
	c, _ := remote.New(remote.Config{URL: ts.URL, Key: "wrong-key"})
	st := c.Probe(context.Background())
	if st.Reachable || st.Error == "" {
		t.Fatalf("%+v", st)
	}
}

func TestCallFigures(t *testing.T) {
	c := standinClient(t, standin.Options{})
	call := c.Begin("/v1/chat/completions", "m", true)
	if st := c.Status(); st.Active != 1 || st.Requests != 1 {
		t.Fatalf("%+v", st)
	}
	time.Sleep(20 * time.Millisecond)
	call.Output()
	time.Sleep(50 * time.Millisecond)
	call.Usage(10, 4, 11)
	call.End(nil)
	call.End(fmt.Errorf("again"))
	st := c.Status()
	l := st.Last
	if st.Active != 0 || st.Failed != 0 || l == nil || l.Outcome != "ok" || l.PromptTokens != 10 || l.CachedTokens != 4 || l.CompletionTokens != 11 {
		t.Fatalf("%+v %+v", st, l)
	}
	// 10 tokens after the first in about 50 ms: about 200/s; the whole
	// request's rate is lower.
	if l.DecodeTokensPerSecond < 20 || l.DecodeTokensPerSecond > 250 || l.TokensPerSecond >= l.DecodeTokensPerSecond || l.FirstTokenMS < 15 {
		t.Fatalf("rates %+v", l)
	}
	if l.Rate() != l.DecodeTokensPerSecond {
		t.Fatal(l.Rate())
	}
}

func TestRunProbes(t *testing.T) {
	c := standinClient(t, standin.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for c.Status().CheckedAt == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if !c.Status().Reachable {
		t.Fatal("Run did not probe")
	}
}

// A client lists the remote's models and sends a chat completion.
func Example() {
	srv := httptest.NewServer(standin.New(standin.Options{Key: "secret-key"}))
	defer srv.Close()
	c, err := remote.New(remote.Config{URL: srv.URL + "/v1", Key: "secret-key"})
	if err != nil {
		panic(err)
	}
	models, _ := c.Models(context.Background())
	fmt.Println(models[0].ID, models[0].ContextLength)
	resp, err := c.Do(context.Background(), http.MethodPost, "/v1/chat/completions",
		[]byte(`{"model":"glm-5.2-fp8","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		panic(err)
	}
	body, _ := remote.ReadBody(resp)
	fmt.Println(len(body) > 0)
	_, err = c.Do(context.Background(), http.MethodPost, "/v1/chat/completions",
		[]byte(`{"model":"glm-5.2-fp8","messages":[{"role":"user","content":"[[status 400]]"}]}`))
	fmt.Println(err)
	// Output:
	// glm-5.2-fp8 131072
	// true
	// remote: 400 Bad Request: stand-in error 400
}
