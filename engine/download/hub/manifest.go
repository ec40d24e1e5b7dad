package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// File is one file of a repository at a commit.
type File struct {
	Path   string // path inside the repository, '/'-separated
	Size   int64  // bytes
	BlobID string // git blob sha1 (40 hex digits)
	// SHA256 is the LFS (or Xet) object id: the sha256 of the content, 64 hex
	// digits. Empty for a file stored in git itself.
	SHA256 string
}

// LFS reports whether the file is stored through LFS or Xet.
func (f File) LFS() bool { return f.SHA256 != "" }

// Etag is the name of the file's blob in the Hugging Face cache: the sha256
// for LFS files and the git blob sha1 otherwise.
func (f File) Etag() string {
	if f.SHA256 != "" {
		return f.SHA256
	}
	return f.BlobID
}

// Manifest lists the files of a repository at a resolved commit.
type Manifest struct {
	Repo     string // repository id, owner/name
	Revision string // as asked: a branch, tag or commit
	Commit   string // the 40-hex commit the revision resolved to
	Files    []File
}

// Size is the sum of the file sizes.
func (m *Manifest) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// maxSiblings is the number of siblings above which huggingface_hub stops
// trusting the revision answer and lists the tree instead.
const maxSiblings = 1000

// maxAPIBody bounds the size of one API answer.
const maxAPIBody = 64 << 20

// maxTreePages bounds the pages of one tree listing (the hub's pages hold
// 1000 entries, so this is ten million files), and maxEmptyPages the pages
// in a row that may list nothing.
const (
	maxTreePages  = 10000
	maxEmptyPages = 10
)

// redact drops a URL's credentials and query for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.RawQuery = ""
	return u.Redacted()
}

// Manifest resolves revision to a commit and lists the repository's files at
// it with sizes and hashes: GET /api/models/{repo}/revision/{rev}?blobs=true.
// When the answer has no siblings, or so many that the hub may have cut the
// list, it lists the tree at the commit instead.
func (c *Client) Manifest(ctx context.Context, repo, revision string) (*Manifest, error) {
	if err := ValidateRepoID(repo); err != nil {
		return nil, err
	}
	if revision == "" {
		revision = "main"
	}
	if err := ValidateRevision(revision); err != nil {
		return nil, err
	}
	u := c.endpoint() + "/api/models/" + repoPath(repo) + "/revision/" + url.PathEscape(revision) + "?blobs=true"
	body, err := c.getAPI(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("hub: list files of %s at %s: %w", repo, revision, err)
	}
	m, err := ParseRevision(body)
	if err != nil {
		return nil, fmt.Errorf("hub: list files of %s at %s: %w", repo, revision, err)
	}
	m.Repo, m.Revision = repo, revision
	if len(m.Files) == 0 || len(m.Files) >= maxSiblings {
		files, err := c.Tree(ctx, repo, m.Commit)
		if err != nil {
			return nil, err
		}
		m.Files = files
	}
	return m, nil
}

// Tree lists every file of the repository at commit through the paginated
// GET /api/models/{repo}/tree/{rev}?recursive=true&expand=false, following
// Link rel="next".
func (c *Client) Tree(ctx context.Context, repo, commit string) ([]File, error) {
	if err := ValidateRepoID(repo); err != nil {
		return nil, err
	}
	u := c.endpoint() + "/api/models/" + repoPath(repo) + "/tree/" + url.PathEscape(commit) + "?recursive=true&expand=false"
	var files []File
	seen := map[string]bool{}
	visited := map[string]bool{}
	empty := 0 // pages in a row that listed no file
	for page := 0; u != ""; page++ {
		switch {
		case page >= maxTreePages:
			return nil, fmt.Errorf("hub: tree of %s at %s: more than %d pages", repo, commit, maxTreePages)
		case visited[u]:
			return nil, fmt.Errorf("hub: tree of %s at %s: page %d links back to an earlier page (%s)", repo, commit, page+1, redact(u))
		case empty > maxEmptyPages:
			return nil, fmt.Errorf("hub: tree of %s at %s: %d pages in a row listed no file", repo, commit, empty)
		}
		visited[u] = true
		body, next, err := c.getAPIPage(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("hub: tree of %s at %s: %w", repo, commit, err)
		}
		pageFiles, err := ParseTree(body)
		if err != nil {
			return nil, fmt.Errorf("hub: tree of %s at %s (page %d): %w", repo, commit, page+1, err)
		}
		empty++
		if len(pageFiles) > 0 {
			empty = 0
		}
		for _, f := range pageFiles {
			if seen[f.Path] {
				return nil, fmt.Errorf("hub: tree of %s at %s lists %q twice", repo, commit, f.Path)
			}
			seen[f.Path] = true
			files = append(files, f)
		}
		if next != "" {
			base, _ := url.Parse(u)
			ref, err := url.Parse(next)
			if err != nil {
				return nil, fmt.Errorf("hub: tree of %s: bad next-page link %q: %w", repo, next, err)
			}
			next = base.ResolveReference(ref).String()
		}
		u = next
	}
	return files, nil
}

func (c *Client) getAPI(ctx context.Context, u string) ([]byte, error) {
	b, _, err := c.getAPIPage(ctx, u)
	return b, err
}

// apiTimeout bounds one API request.
const apiTimeout = time.Minute

func (c *Client) getAPIPage(ctx context.Context, u string) (body []byte, next string, err error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	req, err := c.newRequest(http.MethodGet, u)
	if err != nil {
		return nil, "", err
	}
	resp, err := c.httpClient().Do(req.WithContext(ctx))
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", newStatusError(resp)
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxAPIBody+1))
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", u, err)
	}
	if len(body) > maxAPIBody {
		return nil, "", fmt.Errorf("answer of %s is larger than %d bytes", u, maxAPIBody)
	}
	return body, NextLink(resp.Header.Values("Link")), nil
}

type revisionJSON struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string   `json:"rfilename"`
		Size      *int64   `json:"size"`
		BlobID    string   `json:"blobId"`
		LFS       *lfsJSON `json:"lfs"`
	} `json:"siblings"`
}

type lfsJSON struct {
	SHA256      string `json:"sha256"` // revision API
	OID         string `json:"oid"`    // tree API
	Size        *int64 `json:"size"`
	PointerSize *int64 `json:"pointerSize"`
}

// ParseRevision parses the answer of the revision API (?blobs=true). Files
// are validated: safe relative paths, sizes present and not negative, 40-hex
// blob ids, 64-hex LFS sha256 whose size matches.
func ParseRevision(body []byte) (*Manifest, error) {
	var r revisionJSON
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("revision answer is not the expected JSON: %w", err)
	}
	if !isHex(r.SHA, 40) {
		return nil, fmt.Errorf("revision answer: commit sha %q is not 40 hex digits", r.SHA)
	}
	m := &Manifest{Commit: strings.ToLower(r.SHA)}
	seen := map[string]bool{}
	for i, s := range r.Siblings {
		if s.Size == nil {
			return nil, fmt.Errorf("revision answer: sibling %d (%q) has no size (asked without blobs=true?)", i, s.RFilename)
		}
		f, err := makeFile(s.RFilename, *s.Size, s.BlobID, s.LFS, "sha256")
		if err != nil {
			return nil, fmt.Errorf("revision answer: sibling %d: %w", i, err)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("revision answer lists %q twice", f.Path)
		}
		seen[f.Path] = true
		m.Files = append(m.Files, f)
	}
	return m, nil
}

type treeEntryJSON struct {
	Type string   `json:"type"`
	OID  string   `json:"oid"`
	Size *int64   `json:"size"`
	Path string   `json:"path"`
	LFS  *lfsJSON `json:"lfs"`
}

// ParseTree parses one page of the tree API; directories are skipped.
func ParseTree(body []byte) ([]File, error) {
	var entries []treeEntryJSON
	if err := json.Unmarshal(body, &entries); err != nil {
		return nil, fmt.Errorf("tree answer is not the expected JSON array: %w", err)
	}
	var files []File
	for i, e := range entries {
		switch e.Type {
		case "directory":
			continue
		case "file":
		default:
			return nil, fmt.Errorf("tree entry %d (%q): unknown type %q", i, e.Path, e.Type)
		}
		if e.Size == nil {
			return nil, fmt.Errorf("tree entry %d (%q) has no size", i, e.Path)
		}
		f, err := makeFile(e.Path, *e.Size, e.OID, e.LFS, "oid")
		if err != nil {
			return nil, fmt.Errorf("tree entry %d: %w", i, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// makeFile validates one listed file. shaKey names the LFS hash field of the
// answer being parsed ("sha256" for siblings, "oid" for tree entries).
func makeFile(p string, size int64, blobID string, lfs *lfsJSON, shaKey string) (File, error) {
	if err := ValidatePath(p); err != nil {
		return File{}, err
	}
	if size < 0 {
		return File{}, fmt.Errorf("%q: negative size %d", p, size)
	}
	if !isHex(blobID, 40) {
		return File{}, fmt.Errorf("%q: git blob id %q is not 40 hex digits", p, blobID)
	}
	f := File{Path: p, Size: size, BlobID: strings.ToLower(blobID)}
	if lfs == nil {
		return f, nil
	}
	sha := lfs.SHA256
	if shaKey == "oid" {
		sha = lfs.OID
	}
	if lfs.Size == nil || lfs.PointerSize == nil {
		return File{}, fmt.Errorf("%q: lfs entry needs %s, size and pointerSize", p, shaKey)
	}
	if !isHex(sha, 64) {
		return File{}, fmt.Errorf("%q: lfs %s %q is not 64 hex digits", p, shaKey, sha)
	}
	if *lfs.Size != size {
		return File{}, fmt.Errorf("%q: size %d but lfs size %d", p, size, *lfs.Size)
	}
	f.SHA256 = strings.ToLower(sha)
	return f, nil
}

// ValidatePath checks that p is a clean relative '/'-separated path that
// stays inside the repository: not empty, not absolute, no "." or ".."
// segments, no backslashes or NUL bytes.
func ValidatePath(p string) error {
	if p == "" {
		return fmt.Errorf("empty file path")
	}
	if strings.ContainsAny(p, "\\\x00") {
		return fmt.Errorf("file path %q: backslash or NUL not allowed", p)
	}
	if strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return fmt.Errorf("file path %q: want a clean relative path", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("file path %q: %q segment not allowed", p, seg)
		}
	}
	return nil
}

// isHex reports whether s is n hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// IsCommit reports whether rev is a full commit id (40 hex digits).
func IsCommit(rev string) bool { return isHex(rev, 40) }

// NextLink returns the target of the rel="next" entry of HTTP Link header
// values, or "" if there is none.
func NextLink(values []string) string {
	for _, v := range values {
		for _, part := range splitLinks(v) {
			part = strings.TrimSpace(part)
			if !strings.HasPrefix(part, "<") {
				continue
			}
			end := strings.Index(part, ">")
			if end < 0 {
				continue
			}
			target := part[1:end]
			for _, param := range strings.Split(part[end+1:], ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(param), "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(val), `"`)) {
					if strings.EqualFold(rel, "next") {
						return target
					}
				}
			}
		}
	}
	return ""
}

// splitLinks splits a Link header value at the commas between entries,
// ignoring commas inside <...> and quoted strings.
func splitLinks(v string) []string {
	var parts []string
	start, inURL, inQuote := 0, false, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '<' && !inQuote:
			inURL = true
		case c == '>' && !inQuote:
			inURL = false
		case c == '"' && !inURL:
			inQuote = !inQuote
		case c == ',' && !inURL && !inQuote:
			parts = append(parts, v[start:i])
			start = i + 1
		}
	}
	return append(parts, v[start:])
}
