package container

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadHeader feeds arbitrary file bytes to the header reader: it must
// never panic, and whatever it accepts must satisfy the layout invariants.
func FuzzReadHeader(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, 2))
	for _, h := range []string{
		`{}`,
		`{"__metadata__":{"a":"b"},"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`,
		`{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[3,7]}}`,
		`{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`,
	} {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
		f.Add(append(append(b, h...), make([]byte, 8)...))
	}
	if fx, err := fixtureDir(); err == nil {
		raw, err := os.ReadFile(filepath.Join(fx, "glm52-tiny", "out-idx-00000.safetensors"))
		if err == nil {
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		h, dataStart, err := readHeader(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			return
		}
		dataSize := int64(len(file)) - dataStart
		var prevEnd int64
		for _, ht := range h.Tensors {
			if ht.Begin < 0 || ht.End < ht.Begin || ht.End > dataSize {
				t.Fatalf("accepted tensor %q with offsets [%d, %d] in %d data bytes", ht.Name, ht.Begin, ht.End, dataSize)
			}
			size, ok := DTypeSize(ht.DType)
			if !ok {
				t.Fatalf("accepted dtype %q", ht.DType)
			}
			n := size
			for _, d := range ht.Shape {
				n *= d
			}
			if n != ht.End-ht.Begin {
				t.Fatalf("accepted tensor %q of %d bytes for %d", ht.Name, ht.End-ht.Begin, n)
			}
			if ht.Begin < ht.End {
				if ht.Begin < prevEnd {
					t.Fatalf("accepted overlapping tensor %q", ht.Name)
				}
				prevEnd = ht.End
			}
		}
	})
}

// fixtureDir finds ../shared/fixtures without a testing.TB (for seeds).
func fixtureDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			fx := filepath.Join(dir, "..", "shared", "fixtures")
			_, err := os.Stat(fx)
			return fx, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
