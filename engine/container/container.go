package container

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spoolhq/spool/native/offheap"
)

// MaxShards bounds the number of safetensors files in a model directory.
const MaxShards = 512

// TensorInfo describes one tensor of the container.
type TensorInfo struct {
	Name  string
	DType string
	Shape []int64
	// File is the shard's file name inside the model directory.
	File string
	// Offset is the absolute file offset of the payload.
	Offset int64
	// Size is the payload's byte count.
	Size int64
}

// Numel is the element count (Size / element size).
func (t TensorInfo) Numel() int64 {
	n, _ := DTypeSize(t.DType)
	return t.Size / n
}

// Shard describes one safetensors file of the container.
type Shard struct {
	Name     string // file name inside the model directory
	Size     int64  // file size in bytes
	Tensors  int
	Metadata map[string]string
}

type shard struct {
	Shard
	f    *os.File
	data []byte // the whole file, after Preload
}

// Container is an open model directory: every *.safetensors file in it,
// held open, and the merged tensor index. Its methods are safe for
// concurrent use (reads use ReadAt); Close must not race with them.
type Container struct {
	dir    string
	shards []shard
	byFile map[string]*os.File
	index  map[string]TensorInfo
	names  []string
	sums   checksums // the experts' checksums, once fingerprinted
}

// Open opens every *.safetensors file of dir (sorted by name), validates
// each header and merges the tensor indexes. A tensor name present in two
// shards is refused.
func Open(dir string) (*Container, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("container: %w", err)
	}
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".safetensors") && !e.IsDir() {
			files = append(files, e.Name())
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("container: %s: no *.safetensors files", dir)
	}
	if len(files) > MaxShards {
		return nil, fmt.Errorf("container: %s: %d safetensors files, at most %d are supported", dir, len(files), MaxShards)
	}
	c := &Container{
		dir:    dir,
		byFile: make(map[string]*os.File, len(files)),
		index:  make(map[string]TensorInfo),
	}
	for _, name := range files {
		if err := c.addShard(name); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.names = make([]string, 0, len(c.index))
	for n := range c.index {
		c.names = append(c.names, n)
	}
	sort.Strings(c.names)
	return c, nil
}

func (c *Container) addShard(name string) error {
	path := filepath.Join(c.dir, name)
	// Check before opening: opening a FIFO blocks until a writer comes.
	if fi, err := os.Stat(path); err != nil {
		return fmt.Errorf("container: %w", err)
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("container: %s is not a regular file (%s); a shard must be one", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("container: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("container: %w", err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("container: %s is not a regular file", path)
	}
	h, dataStart, err := readHeader(f, st.Size())
	if err != nil {
		f.Close()
		return fmt.Errorf("container: %s: %w", path, err)
	}
	c.shards = append(c.shards, shard{
		Shard: Shard{Name: name, Size: st.Size(), Tensors: len(h.Tensors), Metadata: h.Metadata},
		f:     f,
	})
	c.byFile[name] = f
	for _, t := range h.Tensors {
		if prev, dup := c.index[t.Name]; dup {
			return fmt.Errorf("container: tensor %q is in both %s and %s", t.Name, prev.File, name)
		}
		c.index[t.Name] = TensorInfo{
			Name:   t.Name,
			DType:  t.DType,
			Shape:  t.Shape,
			File:   name,
			Offset: dataStart + t.Begin,
			Size:   t.End - t.Begin,
		}
	}
	return nil
}

// readHeader reads and validates the header of a safetensors file of the
// given size, returning it with the absolute offset of the data section.
func readHeader(r io.ReaderAt, size int64) (*header, int64, error) {
	if size < 8 {
		return nil, 0, fmt.Errorf("file has %d bytes, too short for a safetensors header length", size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, 0, fmt.Errorf("reading header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > uint64(size-8) {
		return nil, 0, fmt.Errorf("header length %d exceeds the file (%d bytes after the length)", n, size-8)
	}
	if n > MaxHeaderBytes {
		return nil, 0, fmt.Errorf("header length %d exceeds the %d byte limit", n, MaxHeaderBytes)
	}
	raw := make([]byte, n)
	if _, err := r.ReadAt(raw, 8); err != nil {
		return nil, 0, fmt.Errorf("reading %d header bytes: %w", n, err)
	}
	dataStart := 8 + int64(n)
	h, err := parseHeader(raw, size-dataStart)
	if err != nil {
		return nil, 0, err
	}
	return h, dataStart, nil
}

// Close closes every shard.
func (c *Container) Close() error {
	var errs []error
	for _, s := range c.shards {
		if err := s.f.Close(); err != nil {
			errs = append(errs, err)
		}
		if s.data != nil {
			errs = append(errs, offheap.Unmap(s.data))
		}
	}
	c.shards = nil
	c.byFile = nil
	return errors.Join(errs...)
}

// Dir is the model directory.
func (c *Container) Dir() string { return c.dir }

// Shards describes the safetensors files in name order.
func (c *Container) Shards() []Shard {
	out := make([]Shard, len(c.shards))
	for i, s := range c.shards {
		out[i] = s.Shard
	}
	return out
}

// Tensor looks a tensor up by name.
func (c *Container) Tensor(name string) (TensorInfo, bool) {
	t, ok := c.index[name]
	return t, ok
}

// Names lists every tensor name, sorted.
func (c *Container) Names() []string {
	return append([]string(nil), c.names...)
}

// Preload maps every shard into memory, for models that are kept in memory
// whole: matrices and experts then are views of the mapped files
// (ReadMatrix, ViewExpert) instead of copies, valid until Close. The
// streamed expert tier must not preload: it reads experts on demand.
func (c *Container) Preload() error {
	for i := range c.shards {
		s := &c.shards[i]
		if s.data != nil {
			continue
		}
		data, err := offheap.MapFile(s.f)
		if err != nil {
			return fmt.Errorf("container: %w", err)
		}
		if int64(len(data)) != s.Size {
			offheap.Unmap(data)
			return fmt.Errorf("container: %s changed size while open (%d bytes, was %d)", s.Name, len(data), s.Size)
		}
		s.data = data
	}
	return nil
}

// Preloaded reports whether Preload has run.
func (c *Container) Preloaded() bool {
	return len(c.shards) > 0 && c.shards[0].data != nil
}

// view returns the preloaded bytes of e, or false when its shard is not in
// memory.
func (c *Container) view(e Extent) ([]byte, bool) {
	for i := range c.shards {
		s := &c.shards[i]
		if s.Name == e.File && s.data != nil && e.Offset >= 0 && e.Offset+e.Length <= int64(len(s.data)) {
			return s.data[e.Offset : e.Offset+e.Length : e.Offset+e.Length], true
		}
	}
	return nil, false
}

// ReadExtent reads e.Length bytes at e.Offset of shard e.File into dst,
// which must hold exactly e.Length bytes.
func (c *Container) ReadExtent(e Extent, dst []byte) error {
	if v, ok := c.view(e); ok && len(dst) == len(v) {
		copy(dst, v)
		return nil
	}
	f, ok := c.byFile[e.File]
	if !ok {
		return fmt.Errorf("container: no open shard %q", e.File)
	}
	if int64(len(dst)) != e.Length {
		return fmt.Errorf("container: %s: buffer of %d bytes for an extent of %d", e.File, len(dst), e.Length)
	}
	if _, err := f.ReadAt(dst, e.Offset); err != nil {
		return fmt.Errorf("container: %s: reading %d bytes at %d: %w", e.File, e.Length, e.Offset, err)
	}
	return nil
}

// ReadTensorInto reads the payload of tensor name into dst, which must
// hold exactly its Size bytes.
func (c *Container) ReadTensorInto(name string, dst []byte) error {
	t, ok := c.index[name]
	if !ok {
		return fmt.Errorf("container: tensor %q is missing", name)
	}
	if err := c.ReadExtent(t.extent(), dst); err != nil {
		return fmt.Errorf("tensor %q: %w", name, err)
	}
	return nil
}

// ReadTensor reads the payload of tensor name.
func (c *Container) ReadTensor(name string) ([]byte, error) {
	t, ok := c.index[name]
	if !ok {
		return nil, fmt.Errorf("container: tensor %q is missing", name)
	}
	buf := make([]byte, t.Size)
	if err := c.ReadTensorInto(name, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// F32 reads a floating-point tensor (F32, BF16 or F16) of exactly n
// elements as float32.
func (c *Container) F32(name string, n int) ([]float32, error) {
	t, ok := c.index[name]
	if !ok {
		return nil, fmt.Errorf("container: tensor %q is missing", name)
	}
	if err := checkFloat(t, int64(n)); err != nil {
		return nil, err
	}
	raw, err := c.ReadTensor(name)
	if err != nil {
		return nil, err
	}
	return decodeFloats(t.DType, raw), nil
}

func (t TensorInfo) extent() Extent {
	return Extent{File: t.File, Offset: t.Offset, Length: t.Size}
}

// checkFloat checks that t is a float tensor of n elements.
func checkFloat(t TensorInfo, n int64) error {
	switch t.DType {
	case "F32", "BF16", "F16":
	default:
		return fmt.Errorf("container: tensor %q in %s: dtype %s, want F32, BF16 or F16", t.Name, t.File, t.DType)
	}
	if got := t.Numel(); got != n {
		size, _ := DTypeSize(t.DType)
		return fmt.Errorf("container: tensor %q in %s: %d elements (%d bytes), want %d elements (%d bytes)",
			t.Name, t.File, got, t.Size, n, n*size)
	}
	return nil
}

// decodeFloats converts little-endian F32, BF16 or F16 bytes to float32.
func decodeFloats(dtype string, raw []byte) []float32 {
	switch dtype {
	case "BF16":
		out := make([]float32, len(raw)/2)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
		return out
	case "F16":
		out := make([]float32, len(raw)/2)
		for i := range out {
			out[i] = f16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
		return out
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// f16ToF32 converts an IEEE 754 half-precision value, subnormals,
// infinities and NaNs included.
func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: mant * 2^-24
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}
