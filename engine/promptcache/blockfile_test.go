package promptcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

func sampleBlock(t testing.TB, mtp bool) (Hash, *block) {
	seq, hidden := filled(t, promptOf(40, 1))
	root := testIdentity("sample").digest(16)
	hashes := chainHashes(root, seq.Tokens(), 16)
	data, err := seq.ExportBlock(nil, 16, 32, mtp)
	if err != nil {
		t.Fatal(err)
	}
	b := &block{hash: hashes[1], parent: hashes[0], start: 16, tokens: slices.Clone(seq.Tokens()[16:32]), data: data, mtp: mtp}
	if mtp {
		b.hidden = hidden.at(31)
	}
	return root, b
}

func TestBlockFileRoundTrip(t *testing.T) {
	for _, mtp := range []bool{false, true} {
		root, b := sampleBlock(t, mtp)
		raw := encodeBlock(nil, root, b)
		if int64(len(raw)) != fileSize(len(b.tokens), len(b.data), len(b.hidden)) {
			t.Fatalf("file of %d bytes, fileSize says %d", len(raw), fileSize(len(b.tokens), len(b.data), len(b.hidden)))
		}
		id, got, err := parseBlock(raw)
		if err != nil {
			t.Fatal(err)
		}
		if id != root || got.hash != b.hash || got.parent != b.parent || got.start != b.start || got.mtp != mtp ||
			!slices.Equal(got.tokens, b.tokens) || !slices.Equal(got.data, b.data) || !slices.Equal(got.hidden, b.hidden) {
			t.Fatalf("mtp %v: the parsed block differs from the encoded one", mtp)
		}
	}
}

// TestBlockFileDamage: every kind of damage is refused with errBadFile.
func TestBlockFileDamage(t *testing.T) {
	root, b := sampleBlock(t, true)
	good := encodeBlock(nil, root, b)
	damage := map[string]func([]byte) []byte{
		"truncated":      func(r []byte) []byte { return r[:len(r)-100] },
		"header only":    func(r []byte) []byte { return r[:fixedHeader] },
		"empty":          func(r []byte) []byte { return nil },
		"extra bytes":    func(r []byte) []byte { return append(r, 0) },
		"flipped state":  func(r []byte) []byte { r[len(r)/2] ^= 0x40; return r },
		"flipped token":  func(r []byte) []byte { r[fixedHeader+5] ^= 1; return r },
		"flipped sum":    func(r []byte) []byte { r[len(r)-1] ^= 1; return r },
		"magic":          func(r []byte) []byte { r[0] = 'X'; return r },
		"version":        func(r []byte) []byte { binary.LittleEndian.PutUint32(r[8:], FormatVersion+1); return r },
		"flags":          func(r []byte) []byte { r[12] |= 2; return r },
		"token count":    func(r []byte) []byte { binary.LittleEndian.PutUint32(r[116:], 17); return r },
		"no tokens":      func(r []byte) []byte { binary.LittleEndian.PutUint32(r[116:], 0); return r },
		"huge floats":    func(r []byte) []byte { binary.LittleEndian.PutUint64(r[124:], 1<<40); return r },
		"hidden no MTP":  func(r []byte) []byte { r[12] = 0; return r },
		"huge hidden":    func(r []byte) []byte { binary.LittleEndian.PutUint32(r[120:], 1<<30); return r },
		"start too high": func(r []byte) []byte { binary.LittleEndian.PutUint32(r[112:], 1<<31); return r },
	}
	for name, f := range damage {
		t.Run(name, func(t *testing.T) {
			raw := f(bytes.Clone(good))
			if _, _, err := parseBlock(raw); !errors.Is(err, errBadFile) {
				t.Fatalf("damaged file parsed: %v", err)
			}
		})
	}
}

// FuzzParseBlock: the parser never panics, allocates only what the input
// backs, and what it accepts encodes back to the same bytes.
func FuzzParseBlock(f *testing.F) {
	for _, mtp := range []bool{false, true} {
		root, b := sampleBlock(f, mtp)
		f.Add(encodeBlock(nil, root, b))
	}
	tiny := &block{start: 3, tokens: []int{5}, data: []float32{1, 2}}
	f.Add(encodeBlock(nil, Hash{1}, tiny))
	f.Add([]byte(fileMagic))
	f.Fuzz(func(t *testing.T, raw []byte) {
		id, b, err := parseBlock(raw)
		if err != nil {
			if !errors.Is(err, errBadFile) {
				t.Fatalf("error not wrapping errBadFile: %v", err)
			}
			return
		}
		if again := encodeBlock(nil, id, b); !bytes.Equal(again, raw) {
			t.Fatalf("re-encoding an accepted file gives other bytes")
		}
	})
}

// TestBF16IdentityDiffers: a bfloat16 KV cache's blocks are their own (its
// state differs from a float32 one's), while a float32 identity's digest
// is what it was before bfloat16 caches existed.
func TestBF16IdentityDiffers(t *testing.T) {
	f32 := testIdentity("model")
	bf16 := f32
	bf16.Geometry.BF16 = true
	if f32.digest(16) == bf16.digest(16) {
		t.Error("a bfloat16 cache shares the float32 one's identity")
	}
	plain := f32
	plain.Geometry.BF16 = false
	if plain.digest(16) != f32.digest(16) {
		t.Error("the float32 identity changed")
	}
}
