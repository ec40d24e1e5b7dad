package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Body is the answer of Fetch: the bytes of the file from Start on. When
// the server ignored the range (Whole), Start is 0 and the body is the
// whole file; the caller decides whether to read on or close.
type Body struct {
	io.ReadCloser
	Start int64
	Whole bool
}

// ErrBadContentRange is wrapped by the error of a 206 answer whose
// Content-Range is not the range asked for; it is final.
var ErrBadContentRange = errors.New("the server answered other bytes than asked for")

// Fetch starts the download of bytes [start, end) of f at commit through the
// resolve endpoint, following redirects (to the LFS or Xet CDN) with a Range
// header. The returned body yields exactly end-start bytes from start, or,
// when the server ignored the range (200), the whole file from byte 0; a
// connection that ends early makes it fail with io.ErrUnexpectedEOF.
// Answers other than 200/206 are *StatusError; a size that disagrees with
// f.Size is *SizeError; a Content-Range other than the one asked for wraps
// ErrBadContentRange. Cancel ctx to abort the transfer.
func (c *Client) Fetch(ctx context.Context, repo, commit string, f File, start, end int64) (*Body, error) {
	if start < 0 || end > f.Size || start >= end {
		return nil, fmt.Errorf("hub: fetch %s: bad range [%d, %d) of %d bytes", f.Path, start, end, f.Size)
	}
	u := c.ResolveURL(repo, commit, f.Path)
	req, err := c.newRequest(http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", start, end-1))
	// Ask for the bytes as stored: a transparently compressed answer could
	// not be ranged.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := c.httpClient().Do(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			resp.Body.Close()
		}
	}()
	final := resp.Request.URL.Redacted()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		first, last, total, err := ParseContentRange(resp.Header.Get("Content-Range"))
		if err != nil {
			return nil, fmt.Errorf("hub: fetch %s from %s: %w", f.Path, final, err)
		}
		if total >= 0 && total != f.Size {
			return nil, &SizeError{Path: f.Path, Manifest: f.Size, Server: total, URL: final}
		}
		if first != start || last < first || last >= end {
			return nil, fmt.Errorf("hub: fetch %s from %s: %w: asked for bytes %d-%d, got Content-Range %q",
				f.Path, final, ErrBadContentRange, start, end-1, resp.Header.Get("Content-Range"))
		}
		end = last + 1
	case http.StatusOK:
		if resp.ContentLength >= 0 && resp.ContentLength != f.Size {
			return nil, &SizeError{Path: f.Path, Manifest: f.Size, Server: resp.ContentLength, URL: final}
		}
		ok = true
		return &Body{ReadCloser: &exactBody{rc: resp.Body, left: f.Size}, Start: 0, Whole: true}, nil
	case http.StatusRequestedRangeNotSatisfiable:
		return nil, &SizeError{Path: f.Path, Manifest: f.Size, Server: -1, URL: final}
	default:
		return nil, newStatusError(resp)
	}
	ok = true
	return &Body{ReadCloser: &exactBody{rc: resp.Body, left: end - start}, Start: start}, nil
}

// exactBody reads exactly left bytes from rc.
type exactBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *exactBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left == 0 {
		return n, io.EOF
	}
	if err != nil {
		return n, noEOF(err)
	}
	return n, nil
}

func (b *exactBody) Close() error { return b.rc.Close() }

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ParseContentRange parses "bytes first-last/total" (total may be "*",
// returned as -1).
func ParseContentRange(v string) (first, last, total int64, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(v), "bytes ")
	if !ok {
		return 0, 0, 0, fmt.Errorf("Content-Range %q: want \"bytes first-last/total\"", v)
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, fmt.Errorf("Content-Range %q: no total", v)
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, fmt.Errorf("Content-Range %q: no range", v)
	}
	if first, err = strconv.ParseInt(a, 10, 64); err != nil || first < 0 {
		return 0, 0, 0, fmt.Errorf("Content-Range %q: bad first byte", v)
	}
	if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
		return 0, 0, 0, fmt.Errorf("Content-Range %q: bad last byte", v)
	}
	if tot == "*" {
		return first, last, -1, nil
	}
	if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total <= last {
		return 0, 0, 0, fmt.Errorf("Content-Range %q: bad total", v)
	}
	return first, last, total, nil
}
