package container

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	specs := []TensorSpec{
		{"z.first", "F32", []int64{3}},
		{"a.second", "U8", []int64{5}},
		{"empty", "F32", []int64{0}},
		{"scalar", "BF16", nil},
		{"odd \"name\"", "I8", []int64{1, 2}},
	}
	payload := [][]byte{f32Bytes(1, 2, 3), []byte("hello"), nil, {0x80, 0x3f}, {0xff, 1}}
	w, err := NewWriter(path, specs, map[string]string{"producer": "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payload {
		// Stream in one-byte pieces to exercise tensor boundaries.
		for i := range p {
			if _, err := w.Write(p[i : i+1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Shards()[0].Metadata["producer"]; got != "test" {
		t.Errorf("metadata producer %q", got)
	}
	for i, s := range specs {
		ti, ok := c.Tensor(s.Name)
		if !ok {
			t.Fatalf("tensor %q not found", s.Name)
		}
		if (ti.Offset-8)%8 != 0 && i == 0 {
			t.Errorf("data section starts at %d, want 8-byte alignment", ti.Offset)
		}
		got, err := c.ReadTensor(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload[i]) || ti.DType != s.DType {
			t.Errorf("%s: read %v %s, want %v %s", s.Name, got, ti.DType, payload[i], s.DType)
		}
	}
	first, _ := c.Tensor("z.first")
	second, _ := c.Tensor("a.second")
	if second.Offset != first.Offset+first.Size || int64(len(raw)) != second.Offset+5+2+2 {
		t.Errorf("tensors not laid out in declared order: %+v %+v (file %d bytes)", first, second, len(raw))
	}
}

func TestWriterRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	declare := []struct {
		name  string
		specs []TensorSpec
		want  string
	}{
		{"duplicate", []TensorSpec{{"a", "U8", []int64{1}}, {"a", "U8", []int64{1}}}, "declared twice"},
		{"reserved", []TensorSpec{{"__metadata__", "U8", []int64{1}}}, "reserved"},
		{"dtype", []TensorSpec{{"a", "Q4", []int64{1}}}, `dtype "Q4"`},
		{"shape", []TensorSpec{{"a", "U8", []int64{-1}}}, "shape [-1]"},
	}
	for _, tt := range declare {
		if _, err := NewWriter(path, tt.specs, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewWriter = %v, want %q", tt.name, err, tt.want)
		}
	}

	w, err := NewWriter(path, []TensorSpec{{"a", "U8", []int64{4}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 5)); err == nil || !strings.Contains(err.Error(), "past the declared 4 byte") {
		t.Errorf("writing past the end: %v", err)
	}
	if err := w.Close(); err == nil {
		t.Error("Close after a failed write succeeded")
	}

	w, err = NewWriter(path, []TensorSpec{{"a", "U8", []int64{4}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte{1, 2})
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "2 of 4 data bytes written") {
		t.Errorf("Close of an incomplete file: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed writes left files behind: %v", entries)
	}
	if err := writeFile(path, []Tensor{{TensorSpec{"a", "F32", []int64{2}}, make([]byte, 4)}}, nil); err == nil || !strings.Contains(err.Error(), "needs 8 bytes, got 4") {
		t.Errorf("writeFile with a short payload: %v", err)
	}
}

// TestWriterHoles writes payloads as holes, between and after written
// ones: the file has its full size, the holes read as zeros, and a hole
// past the data section is refused.
func TestWriterHoles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.safetensors")
	specs := []TensorSpec{{"a", "U8", []int64{3}}, {"b", "U8", []int64{1 << 20}}, {"c", "F32", []int64{2}}, {"d", "U8", []int64{4096}}}
	w, err := NewWriter(path, specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte{7, 8, 9}); err != nil {
		t.Fatal(err)
	}
	if err := w.Hole(1 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(f32Bytes(1.5, -2)); err != nil {
		t.Fatal(err)
	}
	if err := w.Hole(4096); err != nil {
		t.Fatal(err)
	}
	size := w.Size()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != size {
		t.Errorf("file is %d bytes, Size said %d", st.Size(), size)
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, want := range map[string][]byte{"a": {7, 8, 9}, "b": make([]byte, 1<<20), "c": f32Bytes(1.5, -2), "d": make([]byte, 4096)} {
		got, err := c.ReadTensor(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("tensor %s reads back wrong (%d bytes)", name, len(got))
		}
	}

	w, err = NewWriter(filepath.Join(dir, "past.safetensors"), specs[:1], nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Hole(4); err == nil || !strings.Contains(err.Error(), "hole of 4 bytes") {
		t.Errorf("a hole past the end: %v", err)
	}
	if err := w.Close(); err == nil {
		t.Error("Close after a refused hole succeeded")
	}
}
