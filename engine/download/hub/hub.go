// Package hub is a client for the parts of the Hugging Face Hub HTTP protocol
// that a model download needs: the file manifest of a revision (sizes, git
// blob ids, LFS sha256), ranged downloads through the resolve endpoint and
// its redirects, and the hub's error answers (401/403 gated or private, 404,
// 429, 5xx). It also reads the huggingface_hub environment (HF_ENDPOINT,
// HF_TOKEN and the token file, HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE).
//
// It must not write files, retry, or decide policy: it makes one request per
// call and says precisely what came back. Retries, resume and verification
// belong to package download.
package hub

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultEndpoint is the hub used when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Client talks to one hub endpoint. The zero value is not usable; set at
// least Endpoint.
type Client struct {
	// Endpoint is the hub's base URL without a trailing slash, for example
	// https://huggingface.co.
	Endpoint string
	// Token, if not empty, is sent as "Authorization: Bearer <token>". Go's
	// HTTP client drops it when a redirect leaves the endpoint's host, so the
	// CDN never sees it.
	Token string
	// HTTP is the client used for every request; nil means
	// http.DefaultClient. Its Timeout should be zero: downloads are long and
	// callers bound them with contexts.
	HTTP *http.Client
	// UserAgent is sent on every request when not empty.
	UserAgent string
}

// NewClient returns a client for the endpoint and token of env, with a
// transport that keeps enough idle connections for parallel range requests.
func NewClient(env Env) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = 2 * time.Minute
	return &Client{Endpoint: env.Endpoint, Token: env.Token, UserAgent: "spool", HTTP: &http.Client{Transport: tr}}
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) endpoint() string { return strings.TrimRight(c.Endpoint, "/") }

// newRequest builds a request with the client's headers.
func (c *Client) newRequest(method, rawURL string) (*http.Request, error) {
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("hub: bad URL %q: %w", rawURL, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	return req, nil
}

// ValidateRepoID checks that id looks like a Hub model id: "name" or
// "owner/name", made of letters, digits, '-', '_' and '.', with no "..".
func ValidateRepoID(id string) error {
	parts := strings.Split(id, "/")
	if len(parts) > 2 || id == "" {
		return fmt.Errorf("hub: repository id %q: want owner/name", id)
	}
	for _, p := range parts {
		if p == "" || p == "." || strings.Contains(p, "..") {
			return fmt.Errorf("hub: repository id %q: empty or dotted part %q", id, p)
		}
		for _, r := range p {
			ok := r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
			if !ok {
				return fmt.Errorf("hub: repository id %q: character %q not allowed", id, r)
			}
		}
	}
	return nil
}

// repoPath returns the repository id as a URL path ("owner/name", each part
// escaped).
func repoPath(repo string) string {
	parts := strings.Split(repo, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// filePath escapes a repository file path segment by segment.
func filePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// ResolveURL is the download URL of a file at a revision:
// {endpoint}/{repo}/resolve/{revision}/{path}.
func (c *Client) ResolveURL(repo, revision, path string) string {
	return c.endpoint() + "/" + repoPath(repo) + "/resolve/" + url.PathEscape(revision) + "/" + filePath(path)
}
