package container

import (
	"bytes"
	"encoding/binary"
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

// FuzzParseHeader feeds arbitrary header text with an arbitrary data
// section size to the header parser.
func FuzzParseHeader(f *testing.F) {
	f.Add([]byte(`{}`), int64(0))
	f.Add([]byte(`{"__metadata__":{"format":"pt"},"w":{"dtype":"U8","shape":[6],"data_offsets":[8,14]},"w.qs":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  `), int64(14))
	f.Add([]byte(`{"a":{"dtype":"F16","shape":[2,0],"data_offsets":[0,0]},"b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`), int64(8))
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`), int64(12))
	f.Fuzz(func(t *testing.T, raw []byte, dataSize int64) {
		if dataSize < 0 {
			return
		}
		h, err := parseHeader(raw, dataSize)
		if err != nil {
			return
		}
		seen := make(map[string]bool)
		for _, ht := range h.Tensors {
			if seen[ht.Name] || ht.Name == "" {
				t.Fatalf("accepted duplicate or empty name %q", ht.Name)
			}
			seen[ht.Name] = true
			if ht.End > dataSize || ht.Begin < 0 || ht.End < ht.Begin {
				t.Fatalf("accepted tensor %q with offsets [%d, %d] in %d data bytes", ht.Name, ht.Begin, ht.End, dataSize)
			}
		}
	})
}
