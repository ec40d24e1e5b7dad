package expertpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"
)

func sampleRecord(tb testing.TB) ([]byte, []byte, []byte) {
	rng := rand.New(rand.NewPCG(9, 10))
	region := make([]byte, 3*BlockLen+777)
	for i := range region {
		region[i] = byte(0x88 + rng.IntN(3) - 1 + 16*(rng.IntN(3)-1))
	}
	scales := make([]byte, 300)
	for i := range scales {
		scales[i] = byte(rng.Uint32())
	}
	rec, err := BuildRecord(region, []int64{BlockLen, 2*BlockLen + 700, 77}, scales, false)
	if err != nil {
		tb.Fatal(err)
	}
	return rec, region, scales
}

func TestRecordRoundTrip(t *testing.T) {
	rec, region, scales := sampleRecord(t)
	gotR, gotS := make([]byte, len(region)), make([]byte, len(scales))
	if err := Decode(gotR, gotS, rec); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotR, region) || !bytes.Equal(gotS, scales) {
		t.Fatal("round trip differs")
	}
	if len(rec) > len(region)*3/4 {
		t.Fatalf("record of %d bytes for %d skewed bytes", len(rec), len(region))
	}
}

// TestRecordRefusesCorruption: every single-byte change of a record's
// header is refused (its checksum, the framing); one of its coded data is
// mostly refused by the coder's end-state checks, but may decode to other
// bytes, as a changed byte of a raw shard would (16-bit rANS lanes can
// resynchronize: about 1% of changes on GLM-5.2's statistics, 9% on this
// sample's lower entropy; spool pack --verify checks the experts'
// checksums); padding decodes to the original bytes. None panics.
func TestRecordRefusesCorruption(t *testing.T) {
	rec, region, scales := sampleRecord(t)
	r, err := ParseRecord(rec, int64(len(rec)))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	const trials = 1000
	misread := 0
	for trial := 0; trial < trials; trial++ {
		c := bytes.Clone(rec)
		i := rng.IntN(int(r.ScalesOff)) // the scales are raw payload, not checked
		c[i] ^= byte(1 + rng.IntN(255))
		gotR, gotS := make([]byte, len(region)), make([]byte, len(scales))
		err := Decode(gotR, gotS, c)
		if err == nil {
			if !bytes.Equal(gotR, region) {
				if int64(i) < r.DataOff {
					t.Fatalf("header byte %d changed: decoded without error to different bytes", i)
				}
				misread++
			}
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d: %v does not wrap ErrCorrupt", i, err)
		}
	}
	if misread > trials*15/100 {
		t.Fatalf("%d of %d changed bytes decoded to other bytes without an error", misread, trials)
	}
}

func FuzzParseRecord(f *testing.F) {
	rec, _, _ := sampleRecord(f)
	f.Add(rec)
	f.Add(rec[:100])
	f.Add([]byte("SPXR"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRecord(b, int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v does not wrap ErrCorrupt", err)
			}
			return
		}
		at := r.SlabAt(RecordAlign)
		if r.RegionLen > 1<<24 {
			return
		}
		slab := make([]byte, max(at+int64(len(b)), r.RegionLen))
		copy(slab[at:], b)
		u, err := NewUnpacker(r, slab, at)
		if err != nil {
			return
		}
		if _, err := u.Advance(slab, int64(len(b))); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v does not wrap ErrCorrupt", err)
		}
	})
}

// TestIndexVersion: a pack of another format version (version 1: byte
// rANS, 32 lanes) is refused with an error naming both versions.
func TestIndexVersion(t *testing.T) {
	x := &Index{Sources: []Source{{Name: "out-00001.safetensors", Size: 1 << 30}}}
	b := x.encode()
	binary.LittleEndian.PutUint32(b[8:], 1)
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
	_, err := ParseIndex(b, 1<<20)
	if !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("%v: want ErrVersion, not ErrCorrupt", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "version 1") || !strings.Contains(msg, fmt.Sprintf("version %d", packVersion)) {
		t.Fatalf("%q does not name both versions", msg)
	}
}

func FuzzParseIndex(f *testing.F) {
	x := &Index{
		Sources: []Source{{Name: "out-00001.safetensors", Size: 1 << 30, ModTime: 12345}},
		Entries: []Entry{{Layer: 1, Expert: 0, Offset: 4096, Length: 5000, SlabAt: 8192}, {Layer: 1, Expert: 3, Offset: 12288, Length: 100}},
	}
	b := x.encode()
	f.Add(b, int64(1<<20))
	f.Add(b[:70], int64(100))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		x, err := ParseIndex(b, size)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("%v wraps neither ErrCorrupt nor ErrVersion", err)
			}
			return
		}
		if !bytes.Equal(x.encode(), b[:len(x.encode())]) {
			t.Fatal("a parsed index encodes differently")
		}
	})
}
