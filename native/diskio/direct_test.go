package diskio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/spoolhq/spool/native/offheap"
)

// testFileSize is deliberately not a multiple of DirectAlign.
const testFileSize = 3*DirectAlign + 1234

// writeTestFile writes size pseudo-random bytes to a new file in dir.
func writeTestFile(t *testing.T, dir string, size int) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	var seed [32]byte
	seed[0] = byte(size)
	rand.NewChaCha8(seed).Read(data)
	f, err := os.CreateTemp(dir, "diskio-*.bin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name(), data
}

var openers = []struct {
	name string
	open func(string) (*DirectFile, error)
}{
	{"direct", OpenDirect},
	{"buffered", OpenBuffered},
}

var readCases = []struct {
	off, n int64
}{
	{0, 1},
	{1, 1},
	{4095, 2},
	{DirectAlign, DirectAlign},
	{123, 10000},
	{0, testFileSize},
	{testFileSize - 1, 1},
	{5000, 0},
	{2*DirectAlign + 17, testFileSize - 2*DirectAlign - 17},
}

// checkReads exercises every read method of a file holding want.
func checkReads(t *testing.T, f *DirectFile, want []byte) {
	t.Helper()
	for _, c := range readCases {
		slab, err := offheap.AllocAligned(int(SlabLen(c.n))+1, DirectAlign)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.ReadAtAligned(slab, c.off, c.n)
		if err != nil {
			t.Fatalf("ReadAtAligned(off %d, n %d): %v", c.off, c.n, err)
		}
		if !bytes.Equal(got, want[c.off:c.off+c.n]) {
			t.Errorf("ReadAtAligned(off %d, n %d): wrong bytes", c.off, c.n)
		}
		if c.n > 0 {
			base := uintptr(unsafe.Pointer(&slab[0]))
			at := uintptr(unsafe.Pointer(&got[0]))
			if at < base || at-base != uintptr(c.off%DirectAlign) {
				t.Errorf("ReadAtAligned(off %d, n %d): data at slab offset %d, want %d", c.off, c.n, at-base, c.off%DirectAlign)
			}
		}
		if err := offheap.Free(slab); err != nil {
			t.Fatal(err)
		}

		for _, m := range []struct {
			name string
			read func([]byte, int64) (int, error)
		}{{"ReadAt", f.ReadAt}, {"ReadAtBuffered", f.ReadAtBuffered}} {
			p := make([]byte, c.n)
			n, err := m.read(p, c.off)
			if err != nil || int64(n) != c.n {
				t.Fatalf("%s(off %d, n %d) = %d, %v", m.name, c.off, c.n, n, err)
			}
			if !bytes.Equal(p, want[c.off:c.off+c.n]) {
				t.Errorf("%s(off %d, n %d): wrong bytes", m.name, c.off, c.n)
			}
		}
	}
}

func TestReadsMatchFile(t *testing.T) {
	path, want := writeTestFile(t, t.TempDir(), testFileSize)
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			f, err := o.open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			t.Logf("direct I/O honored: %v", f.Direct())
			if o.name == "buffered" && f.Direct() {
				t.Error("OpenBuffered returned a direct file")
			}
			if f.Size() != testFileSize || f.Path() != path {
				t.Errorf("Size, Path = %d, %q; want %d, %q", f.Size(), f.Path(), testFileSize, path)
			}
			checkReads(t, f, want)
		})
	}
}

func TestShortRead(t *testing.T) {
	path, want := writeTestFile(t, t.TempDir(), testFileSize)
	cases := []struct {
		off, n, got int64
	}{
		{testFileSize - 10, 20, 10},
		{testFileSize - DirectAlign, 2 * DirectAlign, DirectAlign},
		{testFileSize, 1, 0},
		{testFileSize + 5000, 10, 0},
		{0, testFileSize + 1, testFileSize},
	}
	for _, o := range openers {
		f, err := o.open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, c := range cases {
			slab, err := offheap.AllocAligned(int(SlabLen(c.n)), DirectAlign)
			if err != nil {
				t.Fatal(err)
			}
			check := func(method string, err error) {
				t.Helper()
				var se *ShortReadError
				if !errors.As(err, &se) {
					t.Fatalf("%s %s(off %d, n %d): error %v, want *ShortReadError", o.name, method, c.off, c.n, err)
				}
				if se.Path != path || se.Off != c.off || se.Want != c.n || se.Got != c.got || se.Size != testFileSize {
					t.Errorf("%s %s: got %+v, want off %d want %d got %d", o.name, method, *se, c.off, c.n, c.got)
				}
				if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), filepath.Base(path)) {
					t.Errorf("%s %s: error %q does not wrap io.ErrUnexpectedEOF or name the file", o.name, method, err)
				}
			}
			data, err := f.ReadAtAligned(slab, c.off, c.n)
			if data != nil {
				t.Errorf("%s ReadAtAligned returned data with a short read", o.name)
			}
			check("ReadAtAligned", err)

			for _, m := range []struct {
				name string
				read func([]byte, int64) (int, error)
			}{{"ReadAt", f.ReadAt}, {"ReadAtBuffered", f.ReadAtBuffered}} {
				p := make([]byte, c.n)
				n, err := m.read(p, c.off)
				check(m.name, err)
				from := min(c.off, testFileSize)
				if int64(n) != c.got || !bytes.Equal(p[:n], want[from:from+int64(n)]) {
					t.Errorf("%s %s: returned %d bytes, want the %d available", o.name, m.name, n, c.got)
				}
			}
			offheap.Free(slab)
		}
	}
}

func TestReadAtAlignedRejectsBadSlab(t *testing.T) {
	path, _ := writeTestFile(t, t.TempDir(), testFileSize)
	slab, err := offheap.AllocAligned(4*DirectAlign, DirectAlign)
	if err != nil {
		t.Fatal(err)
	}
	defer offheap.Free(slab)
	cases := []struct {
		name   string
		slab   []byte
		off, n int64
		want   string
	}{
		{"misaligned", slab[1:], 0, 10, "not 4096-byte aligned"},
		{"too short", slab[:DirectAlign], 4000, 200, "shorter than the aligned span"},
		{"negative offset", slab, -1, 10, "invalid range"},
		{"negative length", slab, 0, -10, "invalid range"},
		{"overflow", slab, 1<<63 - 10, 20, "invalid range"},
	}
	for _, o := range openers {
		f, err := o.open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, c := range cases {
			_, err := f.ReadAtAligned(c.slab, c.off, c.n)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %s: error %v, want one containing %q", o.name, c.name, err, c.want)
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, o := range openers {
		if _, err := o.open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s missing file: error %v, want os.ErrNotExist", o.name, err)
		}
		if _, err := o.open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s directory: error %v, want 'not a regular file'", o.name, err)
		}
	}
}

func TestAlignedSpan(t *testing.T) {
	cases := []struct {
		off, n, start, length int64
	}{
		{0, 0, 0, 0},
		{0, 1, 0, 4096},
		{4095, 1, 0, 4096},
		{4095, 2, 0, 8192},
		{4096, 4096, 4096, 4096},
		{5000, 18874368, 4096, 18878464},
	}
	for _, c := range cases {
		start, length := AlignedSpan(c.off, c.n)
		if start != c.start || length != c.length {
			t.Errorf("AlignedSpan(%d, %d) = %d, %d; want %d, %d", c.off, c.n, start, length, c.start, c.length)
		}
		if _, l := AlignedSpan(c.off, c.n); l > SlabLen(c.n) {
			t.Errorf("SlabLen(%d) = %d < span %d", c.n, SlabLen(c.n), l)
		}
	}
	for n := int64(0); n < 3*DirectAlign; n += 97 {
		for off := int64(DirectAlign - 3); off < 2*DirectAlign; off += 211 {
			if _, l := AlignedSpan(off, n); l > SlabLen(n) {
				t.Fatalf("SlabLen(%d) = %d < span %d at offset %d", n, SlabLen(n), l, off)
			}
		}
	}
}
