package hub

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

var (
	sha1a   = strings.Repeat("a", 40)
	sha256b = strings.Repeat("b", 64)
)

func TestParseRevision(t *testing.T) {
	good := `{"sha":"` + sha1a + `","siblings":[
		{"rfilename":"config.json","size":12,"blobId":"` + sha1a + `"},
		{"rfilename":"w/model.safetensors","size":5,"blobId":"` + sha1a + `","lfs":{"sha256":"` + sha256b + `","size":5,"pointerSize":130}}]}`
	m, err := ParseRevision([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if m.Commit != sha1a || len(m.Files) != 2 || m.Files[0].LFS() || !m.Files[1].LFS() || m.Files[1].Etag() != sha256b || m.Files[0].Etag() != sha1a || m.Size() != 17 {
		t.Fatalf("parsed %+v", m)
	}
	bad := []struct{ name, body, want string }{
		{"not json", `[`, "not the expected JSON"},
		{"short sha", `{"sha":"abc","siblings":[]}`, "40 hex"},
		{"no size", `{"sha":"` + sha1a + `","siblings":[{"rfilename":"a","blobId":"` + sha1a + `"}]}`, "blobs=true"},
		{"negative size", `{"sha":"` + sha1a + `","siblings":[{"rfilename":"a","size":-1,"blobId":"` + sha1a + `"}]}`, "negative"},
		{"bad blob id", `{"sha":"` + sha1a + `","siblings":[{"rfilename":"a","size":1,"blobId":"zz"}]}`, "git blob id"},
		{"escaping path", `{"sha":"` + sha1a + `","siblings":[{"rfilename":"../x","size":1,"blobId":"` + sha1a + `"}]}`, "not allowed"},
		{"absolute path", `{"sha":"` + sha1a + `","siblings":[{"rfilename":"/etc/x","size":1,"blobId":"` + sha1a + `"}]}`, "clean relative"},
		{"lfs missing keys", `{"sha":"` + sha1a + `","siblings":[{"rfilename":"a","size":1,"blobId":"` + sha1a + `","lfs":{"sha256":"` + sha256b + `"}}]}`, "pointerSize"},
		{"lfs size differs", `{"sha":"` + sha1a + `","siblings":[{"rfilename":"a","size":1,"blobId":"` + sha1a + `","lfs":{"sha256":"` + sha256b + `","size":2,"pointerSize":1}}]}`, "lfs size"},
		{"duplicate", `{"sha":"` + sha1a + `","siblings":[{"rfilename":"a","size":1,"blobId":"` + sha1a + `"},{"rfilename":"a","size":1,"blobId":"` + sha1a + `"}]}`, "twice"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRevision([]byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParseTree(t *testing.T) {
	body := `[{"type":"directory","oid":"` + sha1a + `","size":0,"path":"w"},
		{"type":"file","oid":"` + sha1a + `","size":3,"path":"w/a.bin","lfs":{"oid":"` + sha256b + `","size":3,"pointerSize":130},"xetHash":"x"},
		{"type":"file","oid":"` + sha1a + `","size":2,"path":"b.txt"}]`
	files, err := ParseTree([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].SHA256 != sha256b || files[1].SHA256 != "" {
		t.Fatalf("parsed %+v", files)
	}
	if _, err := ParseTree([]byte(`[{"type":"link","path":"x"}]`)); err == nil {
		t.Error("unknown entry type accepted")
	}
	if _, err := ParseTree([]byte(`{}`)); err == nil {
		t.Error("object accepted as a tree page")
	}
}

func FuzzParseRevision(f *testing.F) {
	f.Add([]byte(`{"sha":"` + sha1a + `","siblings":[{"rfilename":"a/b","size":1,"blobId":"` + sha1a + `"}]}`))
	f.Add([]byte(`{"sha":"` + sha1a + `","siblings":[{"rfilename":"x","size":5,"blobId":"` + sha1a + `","lfs":{"sha256":"` + sha256b + `","size":5,"pointerSize":1}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseRevision(b)
		if err != nil {
			return
		}
		for _, file := range m.Files {
			if ValidatePath(file.Path) != nil || file.Size < 0 || (len(file.Etag()) != 40 && len(file.Etag()) != 64) {
				t.Fatalf("accepted bad file %+v", file)
			}
		}
	})
}

func FuzzParseTree(f *testing.F) {
	f.Add([]byte(`[{"type":"file","oid":"` + sha1a + `","size":2,"path":"b.txt"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := ParseTree(b)
		if err != nil {
			return
		}
		for _, file := range files {
			if ValidatePath(file.Path) != nil || file.Size < 0 {
				t.Fatalf("accepted bad file %+v", file)
			}
		}
	})
}

func TestValidatePath(t *testing.T) {
	ok := []string{"a", "a/b.json", "model-00001-of-00002.safetensors", "a..b"}
	bad := []string{"", "/a", "a/../b", "..", "./a", "a//b", "a/", `a\b`, "a\x00"}
	for _, p := range ok {
		if err := ValidatePath(p); err != nil {
			t.Errorf("ValidatePath(%q): %v", p, err)
		}
	}
	for _, p := range bad {
		if ValidatePath(p) == nil {
			t.Errorf("ValidatePath(%q) accepted", p)
		}
	}
}

func TestValidateRepoID(t *testing.T) {
	for _, id := range []string{"gpt2", "mateogrgic/GLM-5.2-colibri-int4-with-int8-mtp", "a_b/c.d"} {
		if err := ValidateRepoID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", "a/b/c", "../x", "a/..", "a b/c", "/x", "a/"} {
		if ValidateRepoID(id) == nil {
			t.Errorf("%q accepted", id)
		}
	}
}

func TestNextLink(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{`<https://h/api?cursor=a,b>; rel="next"`}, "https://h/api?cursor=a,b"},
		{[]string{`<https://h/p>; rel="prev", <https://h/n>; rel="next"`}, "https://h/n"},
		{[]string{`<https://h/p>; rel=prev`, `<https://h/n>; rel=next`}, "https://h/n"},
		{[]string{`<https://h/x>; title="a, b"; rel="last next"`}, "https://h/x"},
		{[]string{`garbage`}, ""},
	}
	for _, tt := range tests {
		if got := NextLink(tt.in); got != tt.want {
			t.Errorf("NextLink(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzNextLink(f *testing.F) {
	f.Add(`<https://h/n>; rel="next"`)
	f.Add(`<a>; rel=prev, <b>; rel=next`)
	f.Fuzz(func(t *testing.T, v string) {
		got := NextLink([]string{v})
		if got != "" && !strings.Contains(v, got) {
			t.Fatalf("NextLink(%q) = %q, not part of the header", v, got)
		}
	})
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in                 string
		first, last, total int64
		wantErr            bool
	}{
		{"bytes 0-9/10", 0, 9, 10, false},
		{"bytes 5-5/*", 5, 5, -1, false},
		{"bytes 0-9/9", 0, 0, 0, true},
		{"bytes 9-0/10", 0, 0, 0, true},
		{"items 0-1/2", 0, 0, 0, true},
		{"bytes */10", 0, 0, 0, true},
		{"bytes -1-2/3", 0, 0, 0, true},
	}
	for _, tt := range tests {
		a, b, n, err := ParseContentRange(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && (a != tt.first || b != tt.last || n != tt.total)) {
			t.Errorf("ParseContentRange(%q) = %d, %d, %d, %v", tt.in, a, b, n, err)
		}
	}
}

func FuzzParseContentRange(f *testing.F) {
	f.Add("bytes 0-9/10")
	f.Add("bytes 1-2/*")
	f.Fuzz(func(t *testing.T, v string) {
		a, b, n, err := ParseContentRange(v)
		if err == nil && (a < 0 || b < a || (n != -1 && n <= b)) {
			t.Fatalf("accepted %q as %d-%d/%d", v, a, b, n)
		}
	})
}

func TestStatusError(t *testing.T) {
	tests := []struct {
		status    int
		code      string
		is        error
		temporary bool
		msg       string
	}{
		{401, "GatedRepo", ErrGated, false, "gated"},
		{403, "GatedRepo", ErrGated, false, "gated"},
		{403, "", ErrGated, false, "request access"},
		{401, "RepoNotFound", ErrUnauthorized, false, "HF_TOKEN"},
		{401, "", ErrUnauthorized, false, "HF_TOKEN"},
		{404, "RevisionNotFound", ErrNotFound, false, "--revision"},
		{404, "EntryNotFound", ErrNotFound, false, "file not found"},
		{429, "", nil, true, "rate limited"},
		{503, "", nil, true, "server error"},
		{408, "", nil, true, "unexpected"},
	}
	for _, tt := range tests {
		e := &StatusError{StatusCode: tt.status, ErrorCode: tt.code, URL: "https://h/x"}
		if tt.is != nil && !errors.Is(e, tt.is) {
			t.Errorf("%d %s is not %v", tt.status, tt.code, tt.is)
		}
		if e.Temporary() != tt.temporary {
			t.Errorf("%d: Temporary = %v", tt.status, e.Temporary())
		}
		if !strings.Contains(e.Error(), tt.msg) {
			t.Errorf("%d %s: %q lacks %q", tt.status, tt.code, e.Error(), tt.msg)
		}
	}
	if errors.Is(&StatusError{StatusCode: 401, ErrorCode: "GatedRepo"}, ErrUnauthorized) {
		t.Error("gated 401 matched ErrUnauthorized")
	}
}

func TestLoadEnv(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  Env
		err   string
	}{
		{
			name: "defaults",
			env:  map[string]string{"HOME": "/home/u"},
			want: Env{Endpoint: DefaultEndpoint, Home: "/home/u/.cache/huggingface", CacheDir: "/home/u/.cache/huggingface/hub"},
		},
		{
			name:  "xdg and token file",
			env:   map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "/x"},
			files: map[string]string{"/x/huggingface/token": "hf_abc\n"},
			want:  Env{Endpoint: DefaultEndpoint, Home: "/x/huggingface", CacheDir: "/x/huggingface/hub", Token: "hf_abc", TokenSource: "/x/huggingface/token"},
		},
		{
			name:  "everything set",
			env:   map[string]string{"HOME": "/h", "HF_ENDPOINT": "http://127.0.0.1:9/", "HF_HOME": "~/hf", "HF_HUB_CACHE": "/c", "HF_TOKEN": "tok", "HF_HUB_OFFLINE": "1"},
			files: map[string]string{"/h/hf/token": "ignored"},
			want:  Env{Endpoint: "http://127.0.0.1:9", Home: "/h/hf", CacheDir: "/c", Token: "tok", TokenSource: "HF_TOKEN", Offline: true},
		},
		{
			name:  "legacy cache and token path",
			env:   map[string]string{"HOME": "/h", "HUGGINGFACE_HUB_CACHE": "/old", "HF_TOKEN_PATH": "/t"},
			files: map[string]string{"/t": " t2 "},
			want:  Env{Endpoint: DefaultEndpoint, Home: "/h/.cache/huggingface", CacheDir: "/old", Token: "t2", TokenSource: "/t"},
		},
		{
			name: "bad endpoint",
			env:  map[string]string{"HOME": "/h", "HF_ENDPOINT": "huggingface.co"},
			err:  "HF_ENDPOINT",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			read := func(p string) ([]byte, error) {
				if v, ok := tt.files[p]; ok {
					return []byte(v), nil
				}
				return nil, fs.ErrNotExist
			}
			got, err := LoadEnv(lookup, read)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v\nwant %+v", got, err, tt.want)
			}
		})
	}
}

func TestFetchAnswers(t *testing.T) {
	data := []byte("0123456789")
	f := File{Path: "a b/c.bin", Size: 10, BlobID: sha1a}
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		start, end int64
		want       string
		wantErr    error
	}{
		{"206", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.EscapedPath() != "/o/r/resolve/"+sha1a+"/a%20b/c.bin" {
				http.Error(w, r.URL.EscapedPath(), 400)
				return
			}
			w.Header().Set("Content-Range", "bytes 2-5/10")
			w.WriteHeader(206)
			w.Write(data[2:6])
		}, 2, 6, "2345", nil},
		{"200 ignoring the range", func(w http.ResponseWriter, r *http.Request) { w.Write(data) }, 3, 7, "0123456789", nil},
		{"wrong Content-Range", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes 0-3/10")
			w.WriteHeader(206)
			w.Write(data[:4])
		}, 2, 6, "", ErrBadContentRange},
		{"416", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(416) }, 0, 10, "", ErrSizeMismatch},
		{"wrong total", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes 0-9/11")
			w.WriteHeader(206)
			w.Write(data)
		}, 0, 10, "", ErrSizeMismatch},
		{"short body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", "bytes 0-9/10")
			w.Header().Set("Content-Length", "10")
			w.WriteHeader(206)
			w.Write(data[:4])
		}, 0, 10, "", io.ErrUnexpectedEOF},
		{"404", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			w.WriteHeader(404)
		}, 0, 10, "", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			c := &Client{Endpoint: srv.URL}
			body, err := c.Fetch(context.Background(), "o/r", sha1a, f, tt.start, tt.end)
			var got []byte
			if err == nil {
				got, err = io.ReadAll(body)
				body.Close()
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
			if wantStart := tt.start; len(tt.want) == len(data) {
				wantStart = 0
				if body.Start != wantStart || !body.Whole {
					t.Errorf("body starts at %d, want %d", body.Start, wantStart)
				}
			}
		})
	}
}

func TestFetchSendsTokenAndRange(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sekrit" || r.Header.Get("Range") != "bytes=1-3" {
			http.Error(w, "bad headers", 400)
			return
		}
		w.Header().Set("Content-Range", "bytes 1-3/5")
		w.WriteHeader(206)
		w.Write([]byte("bcd"))
	}))
	defer srv.Close()
	c := &Client{Endpoint: srv.URL + "/", Token: "sekrit"}
	body, err := c.Fetch(context.Background(), "gpt2", "main", File{Path: "x", Size: 5, BlobID: sha1a}, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	if b, err := io.ReadAll(body); err != nil || string(b) != "bcd" {
		t.Errorf("got %q, %v", b, err)
	}
	if _, err := c.Fetch(context.Background(), "gpt2", "main", File{Path: "x", Size: 5}, 4, 9); err == nil {
		t.Error("range past the end accepted")
	}
}
