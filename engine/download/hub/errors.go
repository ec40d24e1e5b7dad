package hub

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spoolhq/spool/internal/retryafter"
)

// Errors a StatusError matches with errors.Is.
var (
	// ErrUnauthorized: 401, the hub wants a (valid) token.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrGated: the repository is gated (X-Error-Code GatedRepo) or the token
	// may not read it (403).
	ErrGated = errors.New("access denied (gated or private repository)")
	// ErrNotFound: 404, the repository, revision or file does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSizeMismatch: the server's size of a file differs from the manifest.
	ErrSizeMismatch = errors.New("size mismatch")
)

// StatusError is an HTTP answer other than the one a request expects.
type StatusError struct {
	StatusCode int    // HTTP status
	ErrorCode  string // X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo, ...)
	Message    string // X-Error-Message, else the start of the body
	URL        string
	// RetryAfter is the wait the server asked for (Retry-After), zero if none.
	RetryAfter time.Duration
}

func newStatusError(resp *http.Response) *StatusError {
	e := &StatusError{
		StatusCode: resp.StatusCode,
		ErrorCode:  resp.Header.Get("X-Error-Code"),
		Message:    resp.Header.Get("X-Error-Message"),
		URL:        resp.Request.URL.Redacted(),
		RetryAfter: retryafter.Parse(resp.Header.Get("Retry-After"), time.Now(), time.Hour),
	}
	if e.Message == "" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		e.Message = strings.TrimSpace(string(b))
	}
	return e
}

// Temporary reports whether the same request may succeed later: 408, 429 and
// 5xx answers.
func (e *StatusError) Temporary() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusRequestTimeout || e.StatusCode >= 500
}

// Is matches ErrUnauthorized, ErrGated and ErrNotFound.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized && e.ErrorCode != "GatedRepo"
	case ErrGated:
		return e.ErrorCode == "GatedRepo" || e.StatusCode == http.StatusForbidden
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	}
	return false
}

func (e *StatusError) Error() string {
	what := ""
	switch {
	case e.ErrorCode == "GatedRepo":
		what = "the repository is gated: accept its conditions on the model page, then set HF_TOKEN (or the token file) to a token of that account"
	case e.StatusCode == http.StatusUnauthorized && e.ErrorCode == "RepoNotFound":
		what = "repository not found, or private and no valid token was sent: check the name, or set HF_TOKEN"
	case e.StatusCode == http.StatusUnauthorized:
		what = "the hub wants a valid token: set HF_TOKEN (or the token file) to a token that can read this repository"
	case e.StatusCode == http.StatusForbidden:
		what = "the token may not read this repository (gated or private): request access on the model page, or use another token"
	case e.ErrorCode == "RevisionNotFound":
		what = "revision not found: check --revision"
	case e.ErrorCode == "EntryNotFound":
		what = "file not found at this revision"
	case e.StatusCode == http.StatusNotFound:
		what = "not found: check the repository name and revision"
	case e.StatusCode == http.StatusTooManyRequests:
		what = "rate limited by the hub"
	case e.StatusCode >= 500:
		what = "server error"
	default:
		what = "unexpected answer"
	}
	s := fmt.Sprintf("%s answered %d %s: %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode), what)
	if e.Message != "" {
		s += " (hub says: " + e.Message + ")"
	}
	return s
}

// SizeError reports that the server's idea of a file's size differs from the
// manifest's.
type SizeError struct {
	Path     string
	Manifest int64 // size in the manifest
	Server   int64 // size the server reported; -1 if it has fewer bytes than asked for (416)
	URL      string
}

func (e *SizeError) Error() string {
	if e.Server < 0 {
		return fmt.Sprintf("%s: the manifest says %d bytes but %s has fewer bytes than asked for (416)", e.Path, e.Manifest, e.URL)
	}
	return fmt.Sprintf("%s: the manifest says %d bytes but %s serves %d", e.Path, e.Manifest, e.URL, e.Server)
}

// Unwrap returns ErrSizeMismatch.
func (e *SizeError) Unwrap() error { return ErrSizeMismatch }
