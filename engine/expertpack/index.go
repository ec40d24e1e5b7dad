package expertpack

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// A pack file sits beside the shard whose experts it packs (the shard
// holding each expert's first weight extent), named after it with Suffix.
// All integers little-endian.
//
//	0   "SPOOLPAK", u32 version (2), u32 sources, u32 entries,
//	    u32 index length L, u32 CRC-32C of the index, u32 CRC-32C of [0, 28)
//	64  the index: per source u16 name length, name, u64 size, i64
//	    modification time (ns), 32-byte SHA-256 of its safetensors header
//	    (length prefix included); then per entry (40 bytes) u32 layer, u32
//	    expert, u64 record offset, u64 record length, u64 slab offset, u32
//	    CRC-32C of the expert's raw bytes (weights then scales), u32 zero
//	    records, each at a multiple of RecordAlign, after the index
//
// The sources are every shard the packed experts' bytes come from (the
// shard itself when no expert was worth packing: a pack of no entries
// records that the shard was looked at); a pack whose sources no longer
// match the files beside it is stale and unused.

// Suffix names a shard's pack file: <shard>.spoolpack.
const Suffix = ".spoolpack"

// RecordAlign is the alignment of records in the file and of their slab
// offsets: the direct-read alignment.
const RecordAlign = 4096

const (
	packMagic    = "SPOOLPAK"
	packVersion  = 2
	packHeader   = 64
	entryBytes   = 40
	maxSources   = 4096
	maxEntries   = 1 << 20
	maxIndexLen  = 64 << 20
	maxNameBytes = 4096
)

// Source identifies one shard a pack was made from.
type Source struct {
	Name    string
	Size    int64
	ModTime int64 // nanoseconds since the Unix epoch
	Header  [32]byte
}

// Entry locates one packed expert.
type Entry struct {
	Layer, Expert  int
	Offset, Length int64
	// SlabAt is where in a slab the record is read for in-place decoding.
	SlabAt int64
	// CRC is the CRC-32C of the expert's raw weights then scales.
	CRC uint32
}

// Index is a pack file's table of contents.
type Index struct {
	Sources []Source
	Entries []Entry
}

// Lookup finds the entry of an expert.
func (x *Index) Lookup(layer, expert int) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(x.Entries, [2]int{layer, expert}, func(e Entry, k [2]int) int {
		if e.Layer != k[0] {
			return e.Layer - k[0]
		}
		return e.Expert - k[1]
	})
	if !ok {
		return Entry{}, false
	}
	return x.Entries[i], true
}

// PackPath is the pack file of the shard at path.
func PackPath(shardPath string) string { return shardPath + Suffix }

// ReadIndex reads and checks the index of the pack file at path.
func ReadIndex(path string) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("expertpack: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("expertpack: %w", err)
	}
	var head [packHeader]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return nil, fmt.Errorf("expertpack: %s: %w: reading the header: %v", path, ErrCorrupt, err)
	}
	l := int64(binary.LittleEndian.Uint32(head[20:]))
	if l > maxIndexLen || packHeader+l > st.Size() {
		return nil, fmt.Errorf("expertpack: %s: %w: index of %d bytes in a file of %d", path, ErrCorrupt, l, st.Size())
	}
	buf := make([]byte, packHeader+l)
	copy(buf, head[:])
	if _, err := io.ReadFull(f, buf[packHeader:]); err != nil {
		return nil, fmt.Errorf("expertpack: %s: %w: reading the index: %v", path, ErrCorrupt, err)
	}
	x, err := ParseIndex(buf, st.Size())
	if err != nil {
		return nil, fmt.Errorf("expertpack: %s: %w", path, err)
	}
	return x, nil
}

// ParseIndex parses and checks a pack file's header and index (b starts at
// the file's first byte) for a file of fileSize bytes.
func ParseIndex(b []byte, fileSize int64) (*Index, error) {
	if len(b) < packHeader || string(b[:8]) != packMagic {
		return nil, corrupt("not a pack file (no %q header)", packMagic)
	}
	if got, want := crc32.Checksum(b[:28], castagnoli), binary.LittleEndian.Uint32(b[28:]); got != want {
		return nil, corrupt("header checksum %08x, stored %08x", got, want)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != packVersion {
		return nil, fmt.Errorf("%w %d; this Spool reads version %d (spool pack rewrites the pack)", ErrVersion, v, packVersion)
	}
	for _, c := range b[32:packHeader] {
		if c != 0 {
			return nil, corrupt("reserved header bytes are not zero")
		}
	}
	ns := int(binary.LittleEndian.Uint32(b[12:]))
	ne := int(binary.LittleEndian.Uint32(b[16:]))
	l := int64(binary.LittleEndian.Uint32(b[20:]))
	if ns < 1 || ns > maxSources || ne > maxEntries || l > maxIndexLen || int64(len(b)) < packHeader+l {
		return nil, corrupt("%d sources, %d entries, index of %d bytes (%d available)", ns, ne, l, len(b)-packHeader)
	}
	idx := b[packHeader : packHeader+l]
	if got, want := crc32.Checksum(idx, castagnoli), binary.LittleEndian.Uint32(b[24:]); got != want {
		return nil, corrupt("index checksum %08x, stored %08x", got, want)
	}
	x := &Index{}
	p := 0
	need := func(n int) error {
		if len(idx)-p < n {
			return corrupt("index ends at byte %d, %d more needed", p, n)
		}
		return nil
	}
	for i := 0; i < ns; i++ {
		if err := need(2); err != nil {
			return nil, err
		}
		n := int(binary.LittleEndian.Uint16(idx[p:]))
		p += 2
		if err := need(n + 48); err != nil {
			return nil, err
		}
		s := Source{Name: string(idx[p : p+n])}
		p += n
		s.Size = int64(binary.LittleEndian.Uint64(idx[p:]))
		s.ModTime = int64(binary.LittleEndian.Uint64(idx[p+8:]))
		copy(s.Header[:], idx[p+16:p+48])
		p += 48
		if n == 0 || n > maxNameBytes || filepath.Base(s.Name) != s.Name || s.Name == "." || s.Name == ".." || s.Size < 0 {
			return nil, corrupt("source %d: name %q, size %d", i, s.Name, s.Size)
		}
		x.Sources = append(x.Sources, s)
	}
	if err := need(ne * entryBytes); err != nil {
		return nil, err
	}
	if len(idx)-p != ne*entryBytes {
		return nil, corrupt("index has %d bytes after its entries", len(idx)-p-ne*entryBytes)
	}
	first := roundUp(packHeader+l, RecordAlign)
	var prevEnd int64 = first
	for i := 0; i < ne; i++ {
		e := Entry{
			Layer:  int(binary.LittleEndian.Uint32(idx[p:])),
			Expert: int(binary.LittleEndian.Uint32(idx[p+4:])),
			Offset: int64(binary.LittleEndian.Uint64(idx[p+8:])),
			Length: int64(binary.LittleEndian.Uint64(idx[p+16:])),
			SlabAt: int64(binary.LittleEndian.Uint64(idx[p+24:])),
			CRC:    binary.LittleEndian.Uint32(idx[p+32:]),
		}
		if binary.LittleEndian.Uint32(idx[p+36:]) != 0 {
			return nil, corrupt("entry %d: reserved bytes are not zero", i)
		}
		p += entryBytes
		if e.Layer > 1<<16 || e.Expert > 1<<16 {
			return nil, corrupt("entry %d: layer %d expert %d", i, e.Layer, e.Expert)
		}
		if i > 0 {
			q := x.Entries[i-1]
			if q.Layer > e.Layer || (q.Layer == e.Layer && q.Expert >= e.Expert) {
				return nil, corrupt("entry %d (layer %d expert %d) is out of order", i, e.Layer, e.Expert)
			}
		}
		if e.Offset < prevEnd || e.Offset%RecordAlign != 0 || e.Length < 1 || e.Length > fileSize-e.Offset || e.Offset > fileSize ||
			e.SlabAt < 0 || e.SlabAt%RecordAlign != 0 || e.SlabAt > 1<<40 {
			return nil, corrupt("entry %d (layer %d expert %d): record of %d bytes at %d, slab offset %d, file of %d bytes",
				i, e.Layer, e.Expert, e.Length, e.Offset, e.SlabAt, fileSize)
		}
		prevEnd = e.Offset + e.Length
		x.Entries = append(x.Entries, e)
	}
	return x, nil
}

// encode renders the header and index; records start at
// roundUp(len, RecordAlign).
func (x *Index) encode() []byte {
	var idx []byte
	for _, s := range x.Sources {
		idx = binary.LittleEndian.AppendUint16(idx, uint16(len(s.Name)))
		idx = append(idx, s.Name...)
		idx = binary.LittleEndian.AppendUint64(idx, uint64(s.Size))
		idx = binary.LittleEndian.AppendUint64(idx, uint64(s.ModTime))
		idx = append(idx, s.Header[:]...)
	}
	for _, e := range x.Entries {
		idx = binary.LittleEndian.AppendUint32(idx, uint32(e.Layer))
		idx = binary.LittleEndian.AppendUint32(idx, uint32(e.Expert))
		idx = binary.LittleEndian.AppendUint64(idx, uint64(e.Offset))
		idx = binary.LittleEndian.AppendUint64(idx, uint64(e.Length))
		idx = binary.LittleEndian.AppendUint64(idx, uint64(e.SlabAt))
		idx = binary.LittleEndian.AppendUint32(idx, e.CRC)
		idx = binary.LittleEndian.AppendUint32(idx, 0)
	}
	out := make([]byte, packHeader, packHeader+len(idx))
	copy(out, packMagic)
	binary.LittleEndian.PutUint32(out[8:], packVersion)
	binary.LittleEndian.PutUint32(out[12:], uint32(len(x.Sources)))
	binary.LittleEndian.PutUint32(out[16:], uint32(len(x.Entries)))
	binary.LittleEndian.PutUint32(out[20:], uint32(len(idx)))
	binary.LittleEndian.PutUint32(out[24:], crc32.Checksum(idx, castagnoli))
	binary.LittleEndian.PutUint32(out[28:], crc32.Checksum(out[:28], castagnoli))
	return append(out, idx...)
}

// indexLen is the encoded length of an index with these sources and n
// entries.
func indexLen(sources []Source, n int) int64 {
	l := int64(packHeader + n*entryBytes)
	for _, s := range sources {
		l += int64(2 + len(s.Name) + 48)
	}
	return l
}

// Identify describes the shard at path as a Source: size, modification
// time and the SHA-256 of its safetensors header.
func Identify(path string) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return Source{}, fmt.Errorf("expertpack: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Source{}, fmt.Errorf("expertpack: %w", err)
	}
	var lenBuf [8]byte
	if _, err := f.ReadAt(lenBuf[:], 0); err != nil {
		return Source{}, fmt.Errorf("expertpack: %s: reading the header length: %w", path, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > uint64(st.Size()-8) || n > maxIndexLen*8 {
		return Source{}, fmt.Errorf("expertpack: %s: header length %d does not fit the file", path, n)
	}
	h := sha256.New()
	h.Write(lenBuf[:])
	if _, err := io.Copy(h, io.NewSectionReader(f, 8, int64(n))); err != nil {
		return Source{}, fmt.Errorf("expertpack: %s: reading the header: %w", path, err)
	}
	s := Source{Name: filepath.Base(path), Size: st.Size(), ModTime: st.ModTime().UnixNano()}
	h.Sum(s.Header[:0])
	return s, nil
}

// ErrStale is wrapped by Check when a pack's sources are not the files
// beside it.
var ErrStale = errors.New("expertpack: pack is stale")

// Check verifies that the sources of x are the shards in dir as they are
// now.
func (x *Index) Check(dir string) error {
	for _, s := range x.Sources {
		got, err := Identify(filepath.Join(dir, s.Name))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrStale, err)
		}
		if got != s {
			return fmt.Errorf("%w: %s changed since it was packed (size, time or header differ)", ErrStale, s.Name)
		}
	}
	return nil
}
