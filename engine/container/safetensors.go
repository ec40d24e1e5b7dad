package container

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"unicode/utf8"
)

// MaxHeaderBytes bounds a safetensors JSON header (the Colibri reader's limit).
const MaxHeaderBytes = 512 << 20

// dtypeSizes lists the safetensors dtypes the reader accepts and their
// element sizes in bytes. Any other dtype is refused by name.
var dtypeSizes = map[string]int64{
	"BOOL":    1,
	"U8":      1,
	"I8":      1,
	"F8_E4M3": 1,
	"F8_E5M2": 1,
	"I16":     2,
	"U16":     2,
	"F16":     2,
	"BF16":    2,
	"I32":     4,
	"U32":     4,
	"F32":     4,
	"F64":     8,
	"I64":     8,
	"U64":     8,
}

// DTypeSize returns the element size of a safetensors dtype, or false when
// the reader does not accept the dtype.
func DTypeSize(dtype string) (int64, bool) {
	n, ok := dtypeSizes[dtype]
	return n, ok
}

// headerTensor is one tensor entry of a parsed header, with offsets relative
// to the start of the data section.
type headerTensor struct {
	Name  string
	DType string
	Shape []int64
	Begin int64
	End   int64
}

// header is a parsed and validated safetensors header.
type header struct {
	Tensors  []headerTensor // in offset order
	Metadata map[string]string
}

type rawEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// parseHeader parses the JSON header of a safetensors file whose data
// section holds dataSize bytes, and checks every tensor against it: known
// dtype, non-negative shape without overflow, offsets inside the data
// section, a byte count equal to numel*element size, no overlap and no
// duplicate names. Errors name the tensor; the caller adds the file.
func parseHeader(raw []byte, dataSize int64) (*header, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("header is not valid UTF-8")
	}
	// Writers pad the header to a multiple of 8 bytes with spaces; tolerate
	// NUL padding as well.
	raw = bytes.TrimRight(raw, " \t\r\n\x00")
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("header JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("header JSON is not an object (starts with %v)", tok)
	}
	h := &header{}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header JSON: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("header JSON: key %v is not a string", tok)
		}
		if seen[name] {
			return nil, fmt.Errorf("tensor %q appears twice in the header", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			var md map[string]string
			if err := dec.Decode(&md); err != nil {
				return nil, fmt.Errorf("__metadata__ is not an object of strings: %w", err)
			}
			h.Metadata = md
			continue
		}
		var e rawEntry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("tensor %q: header entry: %w", name, err)
		}
		t, err := checkEntry(name, &e, dataSize)
		if err != nil {
			return nil, err
		}
		h.Tensors = append(h.Tensors, t)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("header JSON: %w", err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return nil, fmt.Errorf("header JSON: after the object: %w", err)
		}
		return nil, fmt.Errorf("header JSON: unexpected %v after the object", tok)
	}
	sort.Slice(h.Tensors, func(i, j int) bool {
		a, b := h.Tensors[i], h.Tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	var prev *headerTensor
	for i := range h.Tensors {
		t := &h.Tensors[i]
		if t.Begin == t.End {
			continue // empty tensors occupy no bytes
		}
		if prev != nil && t.Begin < prev.End {
			return nil, fmt.Errorf("tensor %q (bytes %d..%d) overlaps tensor %q (bytes %d..%d)",
				t.Name, t.Begin, t.End, prev.Name, prev.Begin, prev.End)
		}
		prev = t
	}
	return h, nil
}

func checkEntry(name string, e *rawEntry, dataSize int64) (headerTensor, error) {
	t := headerTensor{Name: name}
	if name == "" {
		return t, errors.New("header has a tensor with an empty name")
	}
	if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
		return t, fmt.Errorf("tensor %q: header entry lacks dtype, shape or data_offsets", name)
	}
	t.DType = *e.DType
	size, ok := dtypeSizes[t.DType]
	if !ok {
		return t, fmt.Errorf("tensor %q: dtype %q is not supported", name, t.DType)
	}
	t.Shape = *e.Shape
	numel := int64(1)
	for _, d := range t.Shape {
		if d < 0 {
			return t, fmt.Errorf("tensor %q: shape %v has a negative dimension", name, t.Shape)
		}
		if d != 0 && numel > math.MaxInt64/d {
			return t, fmt.Errorf("tensor %q: shape %v overflows", name, t.Shape)
		}
		numel *= d
	}
	if numel > math.MaxInt64/size {
		return t, fmt.Errorf("tensor %q: shape %v of %s overflows", name, t.Shape, t.DType)
	}
	off := *e.DataOffsets
	if len(off) != 2 {
		return t, fmt.Errorf("tensor %q: data_offsets has %d entries, want 2", name, len(off))
	}
	t.Begin, t.End = off[0], off[1]
	if t.Begin < 0 || t.End < t.Begin {
		return t, fmt.Errorf("tensor %q: data_offsets [%d, %d] are not ordered", name, t.Begin, t.End)
	}
	if t.End > dataSize {
		return t, fmt.Errorf("tensor %q: data_offsets [%d, %d] end past the data section (%d bytes)", name, t.Begin, t.End, dataSize)
	}
	if want := numel * size; t.End-t.Begin != want {
		return t, fmt.Errorf("tensor %q: %s %v needs %d bytes, data_offsets span %d", name, t.DType, t.Shape, want, t.End-t.Begin)
	}
	return t, nil
}

// HeaderTensors parses the safetensors header at the start of a file of
// fileSize bytes (prefix holds at least the length and the header) and
// lists its tensors, File empty and Offset absolute, as Open would: for
// planning from a shard's header before its payload is there.
func HeaderTensors(prefix []byte, fileSize int64) ([]TensorInfo, error) {
	h, dataStart, err := readHeader(bytes.NewReader(prefix), max(fileSize, int64(len(prefix))))
	if err != nil {
		return nil, fmt.Errorf("container: %w", err)
	}
	if int64(len(prefix)) < dataStart {
		return nil, fmt.Errorf("container: %d bytes hold part of a %d byte header", len(prefix), dataStart)
	}
	out := make([]TensorInfo, len(h.Tensors))
	for i, t := range h.Tensors {
		out[i] = TensorInfo{Name: t.Name, DType: t.DType, Shape: t.Shape, Offset: dataStart + t.Begin, Size: t.End - t.Begin}
	}
	return out, nil
}
