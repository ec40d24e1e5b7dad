package fakehub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// File is one file of a fake repository.
type File struct {
	Path string
	Data []byte
	LFS  bool // served through a redirect and listed with an lfs entry
}

// SHA256 is the sha256 of the file's content.
func (f File) SHA256() string {
	s := sha256.Sum256(f.Data)
	return hex.EncodeToString(s[:])
}

// BlobID is the git blob sha1 of the file's content.
func (f File) BlobID() string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(f.Data))
	h.Write(f.Data)
	return hex.EncodeToString(h.Sum(nil))
}

// Etag is the blob name the Hugging Face cache gives the file.
func (f File) Etag() string {
	if f.LFS {
		return f.SHA256()
	}
	return f.BlobID()
}

// Repo is a fake model repository with one commit.
type Repo struct {
	ID     string // owner/name
	Commit string // 40 hex digits
	// Branches name the commit, for example "main".
	Branches []string
	Files    []File
	// Gated repositories need a token in Hub.Tokens; without one they
	// answer 401 GatedRepo, with a token that is not in Granted 403.
	Gated   bool
	Granted map[string]bool
	// Private repositories answer 401 RepoNotFound without a valid token.
	Private bool
}

// Request describes one content request, for fault injection and the log.
type Request struct {
	Repo  string
	Path  string
	Etag  string
	Start int64 // first byte asked for
	End   int64 // one past the last byte asked for
	// N counts the content requests for this blob so far, from 1.
	N int
}

// Fault is what the hub does to one content request. The zero value serves
// the request normally.
type Fault struct {
	Status     int    // answer with this status and no content
	RetryAfter string // Retry-After header sent with Status
	// DropAfter, when positive, cuts the connection after this many body
	// bytes.
	DropAfter int64
	// Corrupt flips one byte of the body.
	Corrupt bool
	// SizeDelta is added to the total size the answer claims.
	SizeDelta int64
	// RangeShift is added to the first and last byte the Content-Range of
	// a ranged answer claims (the body is the bytes asked for).
	RangeShift int64
	// Hang sends the headers and then nothing until the client goes away.
	Hang bool
	// BytesPerSecond, when positive, paces the body.
	BytesPerSecond int64
}

// Served is what the hub sent for one blob.
type Served struct {
	Bytes    int64     // body bytes written
	Requests []Request // content requests, in arrival order
}

// pace sleeps so that n bytes take n/bps seconds since start.
func pace(start time.Time, n, bps int64) {
	if bps <= 0 {
		return
	}
	due := start.Add(time.Duration(float64(n) / float64(bps) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
}
