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
	"github.com/spoolhq/spool/internal/clock"
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
	ts := httptest.NewServer(standin.New(standin.Options{}))
	defer ts.Close()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, err := remote.New(remote.Config{URL: ts.URL, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	changed, stop := c.Changes()
	defer stop()
	call := c.Begin("/v1/chat/completions", "m", true)
	if st := c.Status(); st.Active != 1 || st.Requests != 1 {
		t.Fatalf("%+v", st)
	}
	<-changed // the start is a change
	clk.Advance(20 * time.Millisecond)
	call.Output()
	clk.Advance(50 * time.Millisecond)
	call.Usage(10, 4, 11)
	call.End(nil)
	call.End(fmt.Errorf("again"))
	<-changed // and the end
	st := c.Status()
	l := st.Last
	if st.Active != 0 || st.Failed != 0 || l == nil || l.Outcome != "ok" || l.PromptTokens != 10 || l.CachedTokens != 4 || l.CompletionTokens != 11 {
		t.Fatalf("%+v %+v", st, l)
	}
	// 10 tokens after the first in 50 ms: 200/s; the whole request's rate
	// is its 11 tokens over 70 ms.
	if l.DecodeTokensPerSecond != 200 || l.TokensPerSecond != 11/0.07 || l.FirstTokenMS != 20 || l.DurationMS != 70 {
		t.Fatalf("rates %+v", l)
	}
	if l.Rate() != l.DecodeTokensPerSecond {
		t.Fatal(l.Rate())
	}
}

func TestRunProbes(t *testing.T) {
	c := standinClient(t, standin.Options{})
	changed, stop := c.Changes()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	<-changed // Run's first probe
	cancel()
	<-done
	if st := c.Status(); !st.Reachable || st.CheckedAt == nil {
		t.Fatalf("Run did not probe: %+v", st)
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
