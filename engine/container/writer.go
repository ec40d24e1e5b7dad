package container

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/spoolhq/spool/internal/atomicfile"
)

// TensorSpec declares one tensor of a safetensors file being written.
type TensorSpec struct {
	Name  string
	DType string
	Shape []int64
}

// Tensor is a declared tensor with its payload.
type Tensor struct {
	TensorSpec
	Data []byte
}

// Writer writes one safetensors file. The tensors are declared up front
// (so the header can be written first) and their payloads are then
// streamed through Write, back to back in declared order. The file appears
// at its path only when Close succeeds.
type Writer struct {
	path    string
	f       *atomicfile.File
	bw      *bufio.Writer
	hdr     int64 // bytes before the data section
	total   int64
	written int64
	err     error
}

// NewWriter declares the tensors of the file at path (laid out in the given
// order) and writes its header. metadata may be nil.
func NewWriter(path string, tensors []TensorSpec, metadata map[string]string) (*Writer, error) {
	hdr, total, err := encodeHeader(tensors, metadata)
	if err != nil {
		return nil, fmt.Errorf("container: writing %s: %w", path, err)
	}
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("container: %w", err)
	}
	w := &Writer{path: path, f: f, bw: bufio.NewWriterSize(f, 1<<20), hdr: 8 + int64(len(hdr)), total: total}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
	if _, err := w.bw.Write(lenBuf[:]); err != nil {
		w.abort()
		return nil, fmt.Errorf("container: writing %s: %w", path, err)
	}
	if _, err := w.bw.Write(hdr); err != nil {
		w.abort()
		return nil, fmt.Errorf("container: writing %s: %w", path, err)
	}
	return w, nil
}

// encodeHeader builds the padded JSON header and returns it with the data
// section's size.
func encodeHeader(tensors []TensorSpec, metadata map[string]string) ([]byte, int64, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			b.WriteByte(',')
		}
		first = false
	}
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sep()
		b.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(&b, k)
			b.WriteByte(':')
			writeJSON(&b, metadata[k])
		}
		b.WriteByte('}')
	}
	seen := make(map[string]bool, len(tensors))
	var off int64
	for _, t := range tensors {
		if t.Name == "" || t.Name == "__metadata__" {
			return nil, 0, fmt.Errorf("tensor name %q is reserved or empty", t.Name)
		}
		if seen[t.Name] {
			return nil, 0, fmt.Errorf("tensor %q is declared twice", t.Name)
		}
		seen[t.Name] = true
		size, ok := dtypeSizes[t.DType]
		if !ok {
			return nil, 0, fmt.Errorf("tensor %q: dtype %q is not supported", t.Name, t.DType)
		}
		n := size
		for _, d := range t.Shape {
			if d < 0 || (d != 0 && n > math.MaxInt64/d) {
				return nil, 0, fmt.Errorf("tensor %q: shape %v is invalid", t.Name, t.Shape)
			}
			n *= d
		}
		if off > math.MaxInt64-n {
			return nil, 0, errors.New("data section overflows")
		}
		sep()
		writeJSON(&b, t.Name)
		fmt.Fprintf(&b, `:{"dtype":%q,"shape":`, t.DType)
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		writeJSON(&b, shape)
		fmt.Fprintf(&b, `,"data_offsets":[%d,%d]}`, off, off+n)
		off += n
	}
	b.WriteByte('}')
	for (8+b.Len())%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes(), off, nil
}

func writeJSON(b *bytes.Buffer, v any) {
	enc, _ := json.Marshal(v) // strings and int slices always encode
	b.Write(enc)
}

// Write appends payload bytes; the tensors' payloads follow each other in
// declared order. Writing past the declared total is an error.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if int64(len(p)) > w.total-w.written {
		w.err = fmt.Errorf("container: writing %s: %d bytes past the declared %d byte data section", w.path, w.written+int64(len(p))-w.total, w.total)
		return 0, w.err
	}
	n, err := w.bw.Write(p)
	w.written += int64(n)
	if err != nil {
		w.err = fmt.Errorf("container: writing %s: %w", w.path, err)
	}
	return n, w.err
}

// Hole advances past the next n payload bytes without writing them: the
// file system leaves a hole that reads as zeros and takes no disk space
// (a skeleton whose headers are true and whose payloads are empty).
func (w *Writer) Hole(n int64) error {
	if w.err != nil {
		return w.err
	}
	if n < 0 || n > w.total-w.written {
		w.err = fmt.Errorf("container: writing %s: a hole of %d bytes at %d of the %d byte data section", w.path, n, w.written, w.total)
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("container: writing %s: %w", w.path, err)
		return w.err
	}
	if _, err := w.f.Seek(n, io.SeekCurrent); err != nil {
		w.err = fmt.Errorf("container: writing %s: %w", w.path, err)
		return w.err
	}
	w.written += n
	return nil
}

// Size is the size of the complete file.
func (w *Writer) Size() int64 { return w.hdr + w.total }

// Close finishes the file: exactly the declared bytes must have been
// written (or skipped as holes). On any failure the partial file is
// removed.
func (w *Writer) Close() error {
	if w.f == nil {
		return errors.New("container: writer already closed")
	}
	err := w.err
	if err == nil && w.written != w.total {
		err = fmt.Errorf("%d of %d data bytes written", w.written, w.total)
	}
	if err == nil {
		err = w.bw.Flush()
	}
	if err == nil {
		err = w.f.Truncate(w.Size()) // a hole at the end has no bytes yet
	}
	if err == nil {
		err = w.f.Commit() // synced, renamed over path, directory synced
	}
	w.f.Abort() // after a failure: the partial file goes
	w.f = nil
	if err != nil {
		if err == w.err {
			return err
		}
		return fmt.Errorf("container: writing %s: %w", w.path, err)
	}
	return nil
}

func (w *Writer) abort() {
	w.f.Abort()
	w.f = nil
}

// writeFile writes a whole safetensors file from in-memory tensors.
func writeFile(path string, tensors []Tensor, metadata map[string]string) error {
	specs := make([]TensorSpec, len(tensors))
	for i, t := range tensors {
		specs[i] = t.TensorSpec
		size, ok := dtypeSizes[t.DType]
		n := size
		for _, d := range t.Shape {
			n *= d
		}
		if ok && n != int64(len(t.Data)) {
			return fmt.Errorf("container: writing %s: tensor %q: %s %v needs %d bytes, got %d", path, t.Name, t.DType, t.Shape, n, len(t.Data))
		}
	}
	w, err := NewWriter(path, specs, metadata)
	if err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}
