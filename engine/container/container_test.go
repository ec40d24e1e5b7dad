package container

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHeaderRefusals(t *testing.T) {
	tests := []struct {
		name     string
		header   string
		dataSize int64
		want     string
	}{
		{"not JSON", `nope`, 0, "header JSON"},
		{"cut short", `{"a": `, 0, `tensor "a": header entry`},
		{"not an object", `[1, 2]`, 0, "not an object"},
		{"trailing garbage", `{} x`, 0, "header JSON"},
		{"second value", `{} {}`, 0, "after the object"},
		{"invalid UTF-8", "{\"\xff\":{}}", 0, "UTF-8"},
		{"entry not an object", `{"t": 3}`, 0, `tensor "t": header entry`},
		{"missing dtype", `{"t": {"shape": [1], "data_offsets": [0, 4]}}`, 4, "lacks dtype"},
		{"missing offsets", `{"t": {"dtype": "F32", "shape": [1]}}`, 4, "lacks dtype, shape or data_offsets"},
		{"unknown dtype", `{"t": {"dtype": "Q4_K", "shape": [1], "data_offsets": [0, 4]}}`, 4, `dtype "Q4_K" is not supported`},
		{"negative dim", `{"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}`, 4, "negative dimension"},
		{"fractional dim", `{"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}}`, 4, `tensor "t"`},
		{"shape overflow", `{"t": {"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}}`, 4, "overflows"},
		{"bytes overflow", `{"t": {"dtype": "F64", "shape": [2305843009213693952], "data_offsets": [0, 4]}}`, 4, "overflows"},
		{"three offsets", `{"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}`, 8, "3 entries"},
		{"reversed offsets", `{"t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}`, 8, "not ordered"},
		{"negative offset", `{"t": {"dtype": "F32", "shape": [0], "data_offsets": [-4, -4]}}`, 8, "not ordered"},
		{"past the end", `{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}`, 4, "end past the data section (4 bytes)"},
		{"wrong byte count", `{"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}`, 8, "F32 [3] needs 12 bytes, data_offsets span 8"},
		{"wrong U8 byte count", `{"t": {"dtype": "U8", "shape": [3], "data_offsets": [0, 4]}}`, 4, "U8 [3] needs 3 bytes, data_offsets span 4"},
		{"overlap", `{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}`, 12, `tensor "b" (bytes 4..12) overlaps tensor "a" (bytes 0..8)`},
		{"duplicate name", `{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}`, 2, `"a" appears twice`},
		{"bad metadata", `{"__metadata__": {"k": 1}}`, 0, "__metadata__"},
		{"empty name", `{"": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}`, 1, "empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseHeader([]byte(tt.header), tt.dataSize)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseHeader(%s) = %v, want an error containing %q", tt.header, err, tt.want)
			}
		})
	}
}

func TestParseHeaderAccepts(t *testing.T) {
	hdr := `{"__metadata__": {"format": "pt"}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},` +
		` "a": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}, "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}}    ` + "\x00"
	h, err := parseHeader([]byte(hdr), 16)
	if err != nil {
		t.Fatal(err)
	}
	if h.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", h.Metadata)
	}
	var names []string
	for _, ht := range h.Tensors {
		names = append(names, ht.Name)
	}
	if got := strings.Join(names, ","); got != "a,e,b" {
		t.Errorf("tensors in offset order %s, want a,e,b", got)
	}
}

func TestOpenRefusals(t *testing.T) {
	good := `{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}`
	tests := []struct {
		name  string
		write func(t *testing.T, dir string)
		want  []string
	}{
		{"shorter than a length", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "a.safetensors"), []byte{1, 2, 3}, 0o644)
		}, []string{"a.safetensors", "too short"}},
		{"header past the end", func(t *testing.T, dir string) {
			b := binary.LittleEndian.AppendUint64(nil, 100)
			os.WriteFile(filepath.Join(dir, "a.safetensors"), append(b, "{}"...), 0o644)
		}, []string{"a.safetensors", "header length 100 exceeds the file (2 bytes"}},
		{"header over the limit", func(t *testing.T, dir string) {
			f, _ := os.Create(filepath.Join(dir, "a.safetensors"))
			f.Write(binary.LittleEndian.AppendUint64(nil, MaxHeaderBytes+1))
			f.Truncate(MaxHeaderBytes + 16) // sparse
			f.Close()
		}, []string{"exceeds the 536870912 byte limit"}},
		{"truncated data", func(t *testing.T, dir string) {
			writeRaw(t, filepath.Join(dir, "a.safetensors"), good, make([]byte, 7))
		}, []string{"a.safetensors", `tensor "t"`, "end past the data section (7 bytes)"}},
		{"corrupt JSON", func(t *testing.T, dir string) {
			writeRaw(t, filepath.Join(dir, "a.safetensors"), strings.Replace(good, "}}", "}", 1), make([]byte, 8))
		}, []string{"a.safetensors", "header JSON"}},
		{"duplicate across shards", func(t *testing.T, dir string) {
			writeRaw(t, filepath.Join(dir, "a.safetensors"), good, make([]byte, 8))
			writeRaw(t, filepath.Join(dir, "b.safetensors"), good, make([]byte, 8))
		}, []string{`tensor "t" is in both a.safetensors and b.safetensors`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.write(t, dir)
			c, err := Open(dir)
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestOpenTruncatedFixture(t *testing.T) {
	src := filepath.Join(fixtures(t), "glm52-tiny", "out-00001.safetensors")
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "out-00001.safetensors"), raw[:len(raw)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "end past the data section") {
		t.Errorf("Open of a truncated shard: %v", err)
	}
}

func TestTensorLookupAcrossShards(t *testing.T) {
	c, _ := openFixture(t, "glm52-tiny")
	tests := []struct {
		name, file, dtype string
		size              int64
	}{
		{"lm_head.weight.qs", "out-00000.safetensors", "F32", 8192 * 4},
		{"model.layers.1.mlp.experts.5.down_proj.weight", "out-00001.safetensors", "U8", 64 * 16},
		{"model.layers.2.self_attn.indexer.wq_b.weight", "out-idx-00000.safetensors", "U8", 128 * 48},
		{"model.layers.4.eh_proj.weight", "out-mtp-00000.safetensors", "U8", 64 * 128},
	}
	for _, tt := range tests {
		ti, ok := c.Tensor(tt.name)
		if !ok {
			t.Errorf("tensor %s not found", tt.name)
			continue
		}
		if ti.File != tt.file || ti.DType != tt.dtype || ti.Size != tt.size {
			t.Errorf("%s: %+v, want file %s dtype %s size %d", tt.name, ti, tt.file, tt.dtype, tt.size)
		}
		raw, err := os.ReadFile(filepath.Join(c.Dir(), ti.File))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.ReadTensor(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, raw[ti.Offset:ti.Offset+ti.Size]) {
			t.Errorf("%s: ReadTensor differs from the file bytes at offset %d", tt.name, ti.Offset)
		}
	}
	if _, ok := c.Tensor("nope"); ok {
		t.Error("found a tensor that does not exist")
	}
	if _, err := c.ReadTensor("nope"); err == nil {
		t.Error("ReadTensor of a missing tensor succeeded")
	}
	names := c.Names()
	if len(names) != 518 || names[0] != "lm_head.weight" {
		t.Errorf("Names: %d names starting %q", len(names), names[0])
	}
}

func TestF32(t *testing.T) {
	vals := []float32{1, -2.5, 0.15625, 65504, float32(math.Inf(-1)), 5.960464477539063e-08, float32(math.Copysign(0, -1))}
	f16 := []uint16{0x3c00, 0xc100, 0x3100, 0x7bff, 0xfc00, 0x0001, 0x8000}
	var f16raw, bf16raw []byte
	for i, v := range vals {
		f16raw = binary.LittleEndian.AppendUint16(f16raw, f16[i])
		bf16raw = binary.LittleEndian.AppendUint16(bf16raw, uint16(math.Float32bits(v)>>16))
	}
	bf16vals := make([]float32, len(vals))
	for i, v := range vals {
		bf16vals[i] = math.Float32frombits(math.Float32bits(v) &^ 0xffff)
	}
	dir := t.TempDir()
	n := int64(len(vals))
	err := writeFile(filepath.Join(dir, "m.safetensors"), []Tensor{
		{TensorSpec{"f32", "F32", []int64{n}}, f32Bytes(vals...)},
		{TensorSpec{"f16", "F16", []int64{n}}, f16raw},
		{TensorSpec{"bf16", "BF16", []int64{n}}, bf16raw},
		{TensorSpec{"u8", "U8", []int64{n}}, make([]byte, n)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tt := range []struct {
		name string
		want []float32
	}{{"f32", vals}, {"f16", vals}, {"bf16", bf16vals}} {
		got, err := c.F32(tt.name, len(vals))
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(tt.want[i]) {
				t.Errorf("%s[%d] = %g, want %g", tt.name, i, got[i], tt.want[i])
			}
		}
	}
	if _, err := c.F32("f32", len(vals)+1); err == nil || !strings.Contains(err.Error(), "7 elements (28 bytes), want 8 elements (32 bytes)") {
		t.Errorf("F32 with the wrong length: %v", err)
	}
	if _, err := c.F32("u8", len(vals)); err == nil || !strings.Contains(err.Error(), "dtype U8") {
		t.Errorf("F32 of a U8 tensor: %v", err)
	}
	nan := f16ToF32(0x7e00)
	if !math.IsNaN(float64(nan)) {
		t.Errorf("f16 0x7e00 = %g, want NaN", nan)
	}
}

// TestOpenFilesReplaceShard: a container opened on placeholders (a shard's
// header over a hole) indexes every tensor; ReplaceShard switches a shard
// to its own file, whose bytes reads then return, and refuses a file with
// another header.
func TestOpenFilesReplaceShard(t *testing.T) {
	src := filepath.Join(fixtures(t), "glm52-tiny")
	dir, holes := t.TempDir(), t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".safetensors") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		n := 8 + int64(binary.LittleEndian.Uint64(raw))
		hole := make([]byte, len(raw))
		copy(hole, raw[:n])
		paths[e.Name()] = filepath.Join(holes, e.Name())
		for path, b := range map[string][]byte{paths[e.Name()]: hole, filepath.Join(dir, e.Name()): raw} {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := OpenFiles(dir, paths)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const name = "model.layers.1.mlp.experts.5.down_proj.weight"
	ti, ok := c.Tensor(name)
	if !ok || c.Dir() != dir {
		t.Fatalf("tensor found %v, dir %s", ok, c.Dir())
	}
	got, err := c.ReadTensor(name)
	if err != nil || !bytes.Equal(got, make([]byte, ti.Size)) {
		t.Fatalf("the placeholder's payload: %v, zero %v", err, bytes.Equal(got, make([]byte, ti.Size)))
	}
	other := "out-00000.safetensors"
	if other == ti.File {
		t.Fatal("pick another shard")
	}
	if err := c.ReplaceShard(ti.File, filepath.Join(dir, other)); err == nil {
		t.Fatal("a file with another header replaced the shard")
	}
	if err := c.ReplaceShard(ti.File, filepath.Join(dir, ti.File)); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, ti.File))
	if got, err := c.ReadTensor(name); err != nil || !bytes.Equal(got, raw[ti.Offset:ti.Offset+ti.Size]) {
		t.Fatalf("after ReplaceShard: %v, equal %v", err, bytes.Equal(got, raw[ti.Offset:ti.Offset+ti.Size]))
	}
}
