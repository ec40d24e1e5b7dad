package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// tokenLog records, per server, whether requests carried a token.
type tokenLog struct {
	mu   sync.Mutex
	seen map[string][]string // server name -> Authorization values
}

func (l *tokenLog) handler(name string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen[name] = append(l.seen[name], r.Header.Get("Authorization"))
		l.mu.Unlock()
		next(w, r)
	}
}

// sameHostOtherPort listens on the loopback address of u's host but
// another port.
func sameHostOtherPort(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestTokenOnlyToTheEndpoint(t *testing.T) {
	log := &tokenLog{seen: map[string][]string{}}
	page := func(path string) string {
		return fmt.Sprintf(`[{"type":"file","oid":"%s","size":1,"path":"%s"}]`, sha1a, path)
	}
	// Another host: "localhost" instead of 127.0.0.1 is another origin to
	// the client, and another port of the same host is too.
	other := sameHostOtherPort(t, log.handler("other port", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, page("b"))
	}))
	otherHost := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	var endpoint string
	main := httptest.NewServer(log.handler("endpoint", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/tree/") && r.URL.Query().Get("cursor") == "":
			w.Header().Set("Link", fmt.Sprintf(`<%s/api/models/o/r/tree/x?cursor=1>; rel="next"`, endpoint))
			io.WriteString(w, page("a0"))
		case strings.Contains(r.URL.Path, "/tree/") && r.URL.Query().Get("cursor") == "1":
			// The next page is on another port.
			w.Header().Set("Link", fmt.Sprintf(`<%s/api/models/o/r/tree/x?cursor=2>; rel="next"`, other.URL))
			io.WriteString(w, page("a1"))
		case strings.Contains(r.URL.Path, "/resolve/"):
			http.Redirect(w, r, otherHost+"/cdn", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer main.Close()
	endpoint = main.URL
	c := &Client{Endpoint: main.URL, Token: "hf_sekrit"}
	files, err := c.Tree(context.Background(), "o/r", sha1a)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("listed %d files across the pages, want 3", len(files))
	}
	// A resolve request redirected to another host.
	if body, err := c.Fetch(context.Background(), "o/r", sha1a, File{Path: "b", Size: int64(len(page("b"))), BlobID: sha1a}, 0, 1); err == nil {
		body.Close()
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, v := range log.seen["endpoint"] {
		if v != "Bearer hf_sekrit" {
			t.Errorf("a request to the endpoint carried %q, want the token", v)
		}
	}
	if len(log.seen["other port"]) < 2 {
		t.Fatalf("the other origin saw %d requests, want the tree page and the redirect", len(log.seen["other port"]))
	}
	for _, v := range log.seen["other port"] {
		if v != "" {
			t.Errorf("a request to another origin carried the token: %q", v)
		}
	}
}

func TestOriginNormalizesPorts(t *testing.T) {
	for _, tt := range []struct{ a, b string }{
		{"https://huggingface.co", "https://huggingface.co:443/x"},
		{"http://Example.com/a", "http://example.com:80"},
	} {
		if origin(tt.a) != origin(tt.b) {
			t.Errorf("origin(%q) = %q, origin(%q) = %q", tt.a, origin(tt.a), tt.b, origin(tt.b))
		}
	}
	for _, tt := range []struct{ a, b string }{
		{"https://huggingface.co", "http://huggingface.co"},
		{"https://huggingface.co", "https://cdn.huggingface.co"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8081"},
	} {
		if origin(tt.a) == origin(tt.b) {
			t.Errorf("%q and %q are one origin", tt.a, tt.b)
		}
	}
}

func TestRedirectLoopIsFinal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	c := &Client{Endpoint: srv.URL}
	_, err := c.Fetch(context.Background(), "o/r", sha1a, File{Path: "x", Size: 10, BlobID: sha1a}, 0, 10)
	if !errors.Is(err, ErrRedirectLoop) {
		t.Fatalf("a redirect loop: %v, want ErrRedirectLoop", err)
	}
	if _, err := c.Manifest(context.Background(), "o/r", "main"); !errors.Is(err, ErrRedirectLoop) {
		t.Fatalf("a redirect loop on the API: %v, want ErrRedirectLoop", err)
	}
}

func TestTreePaginationLoopsAreBounded(t *testing.T) {
	var requests int
	var mu sync.Mutex
	loop := func(empty bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			requests++
			n := requests
			mu.Unlock()
			next := "/api/models/o/r/tree/x?cursor=1"
			if empty {
				// Always a new URL, never a file.
				next = fmt.Sprintf("/api/models/o/r/tree/x?cursor=%d", n)
			}
			w.Header().Set("Link", "<"+next+`>; rel="next"`)
			if empty {
				io.WriteString(w, "[]")
				return
			}
			fmt.Fprintf(w, `[{"type":"file","oid":"%s","size":1,"path":"f%d"}]`, sha1a, n)
		}
	}
	for _, tt := range []struct {
		name  string
		empty bool
		want  string
	}{
		{"a page linking to itself", false, "links back"},
		{"endless empty pages", true, "listed no file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			requests = 0
			srv := httptest.NewServer(loop(tt.empty))
			defer srv.Close()
			_, err := (&Client{Endpoint: srv.URL}).Tree(context.Background(), "o/r", sha1a)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
			if requests > maxEmptyPages+3 {
				t.Fatalf("fetched %d pages before giving up", requests)
			}
		})
	}
}

func TestValidateRevision(t *testing.T) {
	for _, ok := range []string{"main", "v1.0", "refs/pr/12", "feature/x-y_z", strings.Repeat("a", 40), "release-2024.10"} {
		if err := ValidateRevision(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "../../../../tmp/evil_ref", "..", "a/../b", "/abs", "trailing/", "a//b", ".hidden", "a/.b",
		"x.lock", "a b", "a\tb", "a\x00b", "a~1", "a^", "a:b", "a?", "a*", "a[", `a\b`, "@", "a@{1}", "end.",
		strings.Repeat("x", 256),
	} {
		if err := ValidateRevision(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzValidateRevision(f *testing.F) {
	for _, s := range []string{"main", "refs/pr/1", "../x", "a/./b", strings.Repeat("f", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rev string) {
		if ValidateRevision(rev) != nil {
			return
		}
		// An accepted revision never leaves refs/ and names no dot entry.
		for _, part := range strings.Split(rev, "/") {
			if part == "" || part == "." || part == ".." || strings.HasPrefix(part, ".") {
				t.Fatalf("accepted %q with component %q", rev, part)
			}
		}
		if strings.ContainsAny(rev, "\\\x00") {
			t.Fatalf("accepted %q", rev)
		}
	})
}
