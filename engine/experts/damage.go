package experts

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spoolhq/spool/engine/expertpack"
	"github.com/spoolhq/spool/native/diskio"
)

// ReadError is an expert that could not be read whole and intact: a read
// failed or came up short, its bytes are not those the weights'
// fingerprint summed (ErrChecksum), or its shard changed in place since it
// was opened and has no checksum to tell (ErrChanged). Every fill's
// failure but a cancellation is one; errors.As finds it in what Next and
// the model's forwards return.
//
// Layer, Expert and File name the damage in terms a client may see (no
// local path); Err, the cause, may carry local paths.
type ReadError struct {
	Layer, Expert int
	// File is the file read (a shard, or a pack beside it), relative to
	// the model's directory.
	File string
	Err  error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("experts: reading layer %d expert %d from %s: %v", e.Layer, e.Expert, e.File, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// Damaged reports whether the file's bytes are at fault — a checksum
// mismatch, a read past the file's end, a file changed in place, a pack
// record that is corrupt — rather than the device or the system (an I/O
// error): what a Repairer may restore.
func (e *ReadError) Damaged() bool {
	return errors.Is(e.Err, ErrChecksum) || errors.Is(e.Err, ErrChanged) ||
		errors.Is(e.Err, io.ErrUnexpectedEOF) || errors.Is(e.Err, expertpack.ErrCorrupt)
}

// ErrChecksum is an expert's bytes whose CRC-32C is not the one the
// weights' fingerprint took (ChecksumError says which bytes).
var ErrChecksum = errors.New("the bytes are not those fingerprinted (CRC-32C mismatch)")

// ErrChanged is a shard written to or resized in place since it was
// opened, read where no checksum tells whether the bytes are intact.
var ErrChanged = errors.New("the file changed in place since it was opened")

// ChecksumError is one extent of an expert whose bytes do not sum to the
// fingerprint's checksum.
type ChecksumError struct {
	Off, Len  int64 // the extent, in its file
	Want, Got uint32
	// Changed says the file's size or time also changed since it was
	// opened: it was written to in place.
	Changed bool
}

func (e *ChecksumError) Error() string {
	how := ""
	if e.Changed {
		how = "; the file was written to since it was opened"
	}
	return fmt.Sprintf("%v: bytes %d..%d sum to %08x, the fingerprint took %08x%s", ErrChecksum, e.Off, e.Off+e.Len, e.Got, e.Want, how)
}

// Is makes a ChecksumError an ErrChecksum.
func (e *ChecksumError) Is(target error) bool { return target == ErrChecksum }

// Repairer restores an expert's bytes on disk where a read found them
// damaged (ReadError.Damaged): fetching the range again from where the
// model came from, packing the expert again. The tier calls Repair once
// per damaged fill, on a goroutine of its own, while the lease that needs
// the expert waits; when it returns nil the expert is read again, once,
// and a second failure is reported. ctx ends when that lease is released.
// StreamOptions.Repairer nil: damage is only reported (logged once per
// expert, and returned to the lease).
type Repairer interface {
	Repair(ctx context.Context, damage *ReadError) error
}

// readError wraps a fill's failure: a ReadError naming the expert and the
// file (by its name in the model's directory), or the cancellation as it
// is.
func (s *Streamed) readError(f *fill, file int, verb string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, diskio.ErrPoolClosed) {
		return fmt.Errorf("experts: %s layer %d expert %d from %s: %w", verb, f.lc.layer, f.id, s.names[file], err)
	}
	return &ReadError{Layer: f.lc.layer, Expert: f.id, File: s.names[file], Err: err}
}

// damaged reports whether err is damage a Repairer may restore.
func damaged(err error) (*ReadError, bool) {
	var re *ReadError
	return re, errors.As(err, &re) && re.Damaged()
}

// noteDamageLocked logs a damaged expert, once per expert.
func (s *Streamed) noteDamageLocked(re *ReadError) {
	k := [2]int{re.Layer, re.Expert}
	if s.damagedExperts[k] {
		return
	}
	if s.damagedExperts == nil {
		s.damagedExperts = map[[2]int]bool{}
	}
	s.damagedExperts[k] = true
	s.logger().Warn("experts: an expert's bytes on disk are damaged; reads of it fail until it is repaired",
		"layer", re.Layer, "expert", re.Expert, "file", re.File, "err", re.Err)
}
