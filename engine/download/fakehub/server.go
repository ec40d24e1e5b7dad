package fakehub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Hub is an http.Handler that serves fake repositories.
type Hub struct {
	mu       sync.Mutex
	repos    map[string]*hosted
	tokens   map[string]bool
	fault    func(Request) Fault
	rate     int64
	pageSize int
	noSibs   bool
	served   map[string]*Served
	counts   map[string]int
	apiFails int // API requests still to fail
	apiCode  int
}

// FailAPI makes the next n API requests (revision and tree) answer status.
func (h *Hub) FailAPI(n, status int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.apiFails, h.apiCode = n, status
}

// apiFault reports the status the next API request must fail with, or 0.
func (h *Hub) apiFault() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.apiFails <= 0 {
		return 0
	}
	h.apiFails--
	return h.apiCode
}

// hosted is a repository with its files' hashes computed once.
type hosted struct {
	*Repo
	sha256  []string // content sha256 per file
	etag    []string // blob name per file
	listed  []string // git blob id the hub lists per file (of the pointer for LFS)
	pointer []string // LFS pointer file per file
}

func (r *hosted) file(path string) int {
	return slices.IndexFunc(r.Files, func(f File) bool { return f.Path == path })
}

// New returns a hub serving repos.
func New(repos ...Repo) *Hub {
	h := &Hub{repos: map[string]*hosted{}, tokens: map[string]bool{}, served: map[string]*Served{}, counts: map[string]int{}}
	for _, r := range repos {
		h.AddRepo(r)
	}
	return h
}

// AddRepo adds or replaces a repository.
func (h *Hub) AddRepo(r Repo) {
	hr := &hosted{Repo: &r}
	for _, f := range r.Files {
		hr.sha256 = append(hr.sha256, f.SHA256())
		hr.etag = append(hr.etag, f.Etag())
		hr.pointer = append(hr.pointer, pointer(f))
		hr.listed = append(hr.listed, pointerOrBlobID(f))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.repos[r.ID] = hr
}

// AddToken makes token a valid token.
func (h *Hub) AddToken(token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tokens[token] = true
}

// SetFault installs the function that decides the fault of each content
// request; nil serves every request normally.
func (h *Hub) SetFault(f func(Request) Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fault = f
}

// SetRate paces every content answer to bytesPerSecond (0: no pacing)
// unless a fault sets its own pace.
func (h *Hub) SetRate(bytesPerSecond int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rate = bytesPerSecond
}

// SetTreePageSize sets how many entries one tree page holds (default 1000).
func (h *Hub) SetTreePageSize(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pageSize = n
}

// OmitSiblings makes the revision API answer without a siblings list, as the
// hub may for very large repositories, so clients must list the tree.
func (h *Hub) OmitSiblings(omit bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noSibs = omit
}

// Served returns what was served per blob (etag) since the last Reset.
func (h *Hub) Served() map[string]Served {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]Served, len(h.served))
	for k, v := range h.served {
		out[k] = Served{Bytes: v.Bytes, Requests: slices.Clone(v.Requests)}
	}
	return out
}

// Reset forgets what was served (request numbering per blob goes on).
func (h *Hub) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.served = map[string]*Served{}
}

func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts, err := splitPath(r.URL.EscapedPath())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if parts[0] == "api" {
		if code := h.apiFault(); code != 0 {
			hubError(w, code, "", http.StatusText(code))
			return
		}
	}
	switch {
	case len(parts) == 6 && parts[0] == "api" && parts[1] == "models" && parts[4] == "revision":
		h.serveRevision(w, r, parts[2]+"/"+parts[3], parts[5])
	case len(parts) == 6 && parts[0] == "api" && parts[1] == "models" && parts[4] == "tree":
		h.serveTree(w, r, parts[2]+"/"+parts[3], parts[5])
	case len(parts) >= 5 && parts[2] == "resolve":
		h.serveResolve(w, r, parts[0]+"/"+parts[1], parts[3], strings.Join(parts[4:], "/"))
	case len(parts) == 4 && parts[0] == "_cdn":
		h.serveCDN(w, r, parts[1]+"/"+parts[2], parts[3])
	default:
		http.NotFound(w, r)
	}
}

func splitPath(escaped string) ([]string, error) {
	raw := strings.Split(strings.Trim(escaped, "/"), "/")
	out := make([]string, len(raw))
	for i, p := range raw {
		s, err := url.PathUnescape(p)
		if err != nil {
			return nil, fmt.Errorf("bad path segment %q", p)
		}
		out[i] = s
	}
	return out, nil
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// authorize finds a repository and checks the request's token against it,
// writing the hub's error answer when it fails.
func (h *Hub) authorize(w http.ResponseWriter, r *http.Request, id string) (*hosted, bool) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	h.mu.Lock()
	repo := h.repos[id]
	valid := tok != "" && h.tokens[tok]
	h.mu.Unlock()
	switch {
	case repo == nil && !valid, repo != nil && repo.Private && !valid:
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return nil, false
	case repo == nil:
		hubError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
		return nil, false
	case repo.Gated && !valid:
		hubError(w, http.StatusUnauthorized, "GatedRepo", "Access to model "+id+" is restricted. You must be authenticated to access it.")
		return nil, false
	case repo.Gated && !repo.Granted[tok]:
		hubError(w, http.StatusForbidden, "GatedRepo", "Access to model "+id+" is restricted and you are not in the authorized list.")
		return nil, false
	}
	return repo, true
}

func (r *Repo) hasRevision(rev string) bool {
	return rev == r.Commit || slices.Contains(r.Branches, rev)
}

func (h *Hub) serveRevision(w http.ResponseWriter, r *http.Request, id, rev string) {
	repo, ok := h.authorize(w, r, id)
	if !ok {
		return
	}
	if !repo.hasRevision(rev) {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	blobs := r.URL.Query().Get("blobs") == "true"
	type lfs struct {
		SHA256      string `json:"sha256"`
		Size        int64  `json:"size"`
		PointerSize int64  `json:"pointerSize"`
	}
	type sibling struct {
		RFilename string `json:"rfilename"`
		Size      *int64 `json:"size,omitempty"`
		BlobID    string `json:"blobId,omitempty"`
		LFS       *lfs   `json:"lfs,omitempty"`
	}
	out := map[string]any{"_id": "fake", "id": repo.ID, "modelId": repo.ID, "sha": repo.Commit, "private": repo.Private}
	h.mu.Lock()
	noSibs := h.noSibs
	h.mu.Unlock()
	if !noSibs {
		sibs := []sibling{}
		for i, f := range repo.Files {
			s := sibling{RFilename: f.Path}
			if blobs {
				n := int64(len(f.Data))
				s.Size, s.BlobID = &n, repo.listed[i]
				if f.LFS {
					s.LFS = &lfs{SHA256: repo.sha256[i], Size: n, PointerSize: int64(len(repo.pointer[i]))}
				}
			}
			sibs = append(sibs, s)
		}
		out["siblings"] = sibs
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// pointer is the git LFS pointer file of f.
func pointer(f File) string {
	return fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", f.SHA256(), len(f.Data))
}

// pointerOrBlobID is the git blob id the hub lists: of the pointer file for
// LFS files, of the content otherwise.
func pointerOrBlobID(f File) string {
	if f.LFS {
		return File{Data: []byte(pointer(f))}.BlobID()
	}
	return f.BlobID()
}

func (h *Hub) serveTree(w http.ResponseWriter, r *http.Request, id, rev string) {
	repo, ok := h.authorize(w, r, id)
	if !ok {
		return
	}
	if !repo.hasRevision(rev) {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	type lfs struct {
		OID         string `json:"oid"`
		Size        int64  `json:"size"`
		PointerSize int64  `json:"pointerSize"`
	}
	type entry struct {
		Type string `json:"type"`
		OID  string `json:"oid"`
		Size int64  `json:"size"`
		Path string `json:"path"`
		LFS  *lfs   `json:"lfs,omitempty"`
	}
	var entries []entry
	dirs := map[string]bool{}
	for i, f := range repo.Files {
		for d := f.Path; strings.Contains(d, "/"); {
			d = d[:strings.LastIndex(d, "/")]
			if !dirs[d] {
				dirs[d] = true
				entries = append(entries, entry{Type: "directory", OID: strings.Repeat("0", 40), Path: d})
			}
		}
		e := entry{Type: "file", OID: repo.listed[i], Size: int64(len(f.Data)), Path: f.Path}
		if f.LFS {
			e.LFS = &lfs{OID: repo.sha256[i], Size: int64(len(f.Data)), PointerSize: int64(len(repo.pointer[i]))}
		}
		entries = append(entries, e)
	}
	h.mu.Lock()
	size := h.pageSize
	h.mu.Unlock()
	if size <= 0 {
		size = 1000
	}
	cursor, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	cursor = min(max(cursor, 0), len(entries))
	end := min(cursor+size, len(entries))
	if end < len(entries) {
		next := fmt.Sprintf("http://%s%s?recursive=true&expand=false&cursor=%d", r.Host, r.URL.EscapedPath(), end)
		w.Header().Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", next))
	}
	page := entries[cursor:end]
	if page == nil {
		page = []entry{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(page)
}

func (h *Hub) serveResolve(w http.ResponseWriter, r *http.Request, id, rev, path string) {
	repo, ok := h.authorize(w, r, id)
	if !ok {
		return
	}
	if !repo.hasRevision(rev) {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	i := repo.file(path)
	if i < 0 {
		hubError(w, http.StatusNotFound, "EntryNotFound", path+" does not exist on "+rev)
		return
	}
	f := repo.Files[i]
	w.Header().Set("X-Repo-Commit", repo.Commit)
	if f.LFS {
		w.Header().Set("X-Linked-Etag", `"`+repo.sha256[i]+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
		w.Header().Set("ETag", `"`+repo.listed[i]+`"`)
		http.Redirect(w, r, "/_cdn/"+repo.ID+"/"+repo.sha256[i], http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+repo.etag[i]+`"`)
	h.serveContent(w, r, repo, i)
}

func (h *Hub) serveCDN(w http.ResponseWriter, r *http.Request, id, sha string) {
	h.mu.Lock()
	repo := h.repos[id]
	h.mu.Unlock()
	if repo == nil {
		http.NotFound(w, r)
		return
	}
	i := slices.IndexFunc(repo.sha256, func(s string) bool { return s == sha })
	if i < 0 || !repo.Files[i].LFS {
		http.NotFound(w, r)
		return
	}
	h.serveContent(w, r, repo, i)
}

// serveContent answers a (ranged) content request, applying the fault the
// test chose for it and counting what it sends.
func (h *Hub) serveContent(w http.ResponseWriter, r *http.Request, repo *hosted, i int) {
	f := repo.Files[i]
	size := int64(len(f.Data))
	start, end, ranged, err := parseRange(r.Header.Get("Range"), size)
	if err != nil {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		http.Error(w, err.Error(), http.StatusRequestedRangeNotSatisfiable)
		return
	}
	etag := repo.etag[i]
	h.mu.Lock()
	h.counts[etag]++
	req := Request{Repo: repo.ID, Path: f.Path, Etag: etag, Start: start, End: end, N: h.counts[etag]}
	s := h.served[etag]
	if s == nil {
		s = &Served{}
		h.served[etag] = s
	}
	s.Requests = append(s.Requests, req)
	var fault Fault
	if h.fault != nil {
		fault = h.fault(req)
	}
	rate := h.rate
	h.mu.Unlock()
	if fault.BytesPerSecond > 0 {
		rate = fault.BytesPerSecond
	}
	if fault.Status != 0 {
		if fault.RetryAfter != "" {
			w.Header().Set("Retry-After", fault.RetryAfter)
		}
		hubError(w, fault.Status, "", http.StatusText(fault.Status))
		return
	}
	body := f.Data[start:end]
	if fault.Corrupt && len(body) > 0 {
		body = slices.Clone(body)
		body[len(body)/2] ^= 0x5a
	}
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(int64(len(body)), 10))
	if ranged {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start+fault.RangeShift, end-1+fault.RangeShift, size+fault.SizeDelta))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	flusher, _ := w.(http.Flusher)
	if fault.Hang {
		if flusher != nil {
			flusher.Flush()
		}
		<-r.Context().Done()
		return
	}
	began := time.Now()
	var sent int64
	const chunk = 32 << 10
	for sent < int64(len(body)) {
		n := min(int64(chunk), int64(len(body))-sent)
		if fault.DropAfter > 0 && sent+n > fault.DropAfter {
			n = fault.DropAfter - sent
		}
		if n > 0 {
			m, err := w.Write(body[sent : sent+n])
			h.count(etag, int64(m))
			sent += int64(m)
			if err != nil {
				return
			}
		}
		if fault.DropAfter > 0 && sent >= fault.DropAfter {
			if flusher != nil {
				flusher.Flush()
			}
			panic(http.ErrAbortHandler)
		}
		pace(began, sent, rate)
	}
}

func (h *Hub) count(etag string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.served[etag]; s != nil {
		s.Bytes += n
	}
}

// parseRange parses a single "bytes=a-b", "bytes=a-" or "bytes=-n" range
// against size. Without a Range header it returns the whole file.
func parseRange(v string, size int64) (start, end int64, ranged bool, err error) {
	if v == "" {
		return 0, size, false, nil
	}
	spec, ok := strings.CutPrefix(v, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, 0, false, fmt.Errorf("unsupported Range %q", v)
	}
	a, b, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, 0, false, fmt.Errorf("bad Range %q", v)
	}
	if a == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false, fmt.Errorf("bad Range %q", v)
		}
		return max(size-n, 0), size, true, nil
	}
	start, err = strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 || start >= size {
		return 0, 0, false, fmt.Errorf("Range %q outside %d bytes", v, size)
	}
	end = size
	if b != "" {
		last, err := strconv.ParseInt(b, 10, 64)
		if err != nil || last < start {
			return 0, 0, false, fmt.Errorf("bad Range %q", v)
		}
		end = min(last+1, size)
	}
	return start, end, true, nil
}
