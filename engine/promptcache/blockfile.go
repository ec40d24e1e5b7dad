package promptcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// A block file holds one block, little-endian:
//
//	magic      8 bytes  "SPOOLPC\x00"
//	version    u32      FormatVersion
//	flags      u32      bit 0: the block carries MTP rows and a hidden state
//	identity   32 bytes the cache identity's digest (Identity, block size, format)
//	hash       32 bytes the block's chain hash
//	parent     32 bytes the previous block's chain hash (the identity digest for the first)
//	start      u32      position of the block's first token
//	tokens     u32      token count
//	hidden     u32      float32 values of the hidden state (0 without MTP)
//	floats     u64      float32 values of the state (kvcache block layout)
//	token ids  tokens x u32
//	state      floats x f32
//	hidden     hidden x f32
//	checksum   u32      CRC-32C (Castagnoli) of every byte before it
const (
	fileMagic   = "SPOOLPC\x00"
	fixedHeader = 8 + 4 + 4 + 3*32 + 4 + 4 + 4 + 8
	flagMTP     = 1

	// maxFileTokens and maxFileFloats bound what a header may declare.
	maxFileTokens = 1 << 16
	maxFileFloats = 1 << 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// block is one cached block: its place in the chain, its tokens and the
// state they leave in a sequence. A block is immutable once made.
type block struct {
	hash, parent Hash
	start        int
	tokens       []int
	data         []float32 // kvcache block layout
	mtp          bool      // data carries MTP rows and hidden is set
	hidden       []float32 // final-normed hidden state of the last position
}

// memBytes is what the block holds in memory.
func (b *block) memBytes() int64 {
	return 4*int64(len(b.data)+len(b.hidden)) + 8*int64(len(b.tokens)) + blockOverhead
}

// blockOverhead approximates a memory block's bookkeeping (struct, map and
// list entries).
const blockOverhead = 256

// fileSize is the size of the file of a block with the given counts.
func fileSize(tokens, floats, hidden int) int64 {
	return fixedHeader + 4*int64(tokens) + 4*int64(floats) + 4*int64(hidden) + 4
}

// encodeBlock appends the file of b, carrying identity, to dst.
func encodeBlock(dst []byte, identity Hash, b *block) []byte {
	start := len(dst)
	var flags uint32
	hidden := 0
	if b.mtp {
		flags |= flagMTP
		hidden = len(b.hidden)
	}
	dst = append(dst, fileMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, FormatVersion)
	dst = binary.LittleEndian.AppendUint32(dst, flags)
	dst = append(dst, identity[:]...)
	dst = append(dst, b.hash[:]...)
	dst = append(dst, b.parent[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(b.start))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b.tokens)))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(hidden))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(b.data)))
	for _, t := range b.tokens {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(t))
	}
	dst = appendFloats(dst, b.data)
	if b.mtp {
		dst = appendFloats(dst, b.hidden)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func appendFloats(dst []byte, v []float32) []byte {
	for _, f := range v {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
	}
	return dst
}

// errBadFile is wrapped by every parse error.
var errBadFile = errors.New("not a valid block file")

// parseBlock decodes a block file, checking its framing and checksum (not
// whether it belongs to this cache: see Cache.verify). It returns the
// identity the file carries.
func parseBlock(raw []byte) (identity Hash, b *block, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errBadFile, fmt.Sprintf(format, args...))
	}
	if len(raw) < fixedHeader+4 {
		return Hash{}, nil, bad("%d bytes, shorter than a header", len(raw))
	}
	if string(raw[:8]) != fileMagic {
		return Hash{}, nil, bad("wrong magic %q", raw[:8])
	}
	le := binary.LittleEndian
	if v := le.Uint32(raw[8:]); v != FormatVersion {
		return Hash{}, nil, bad("format version %d, want %d", v, FormatVersion)
	}
	flags := le.Uint32(raw[12:])
	if flags&^flagMTP != 0 {
		return Hash{}, nil, bad("unknown flags %#x", flags)
	}
	b = &block{mtp: flags&flagMTP != 0}
	copy(identity[:], raw[16:48])
	copy(b.hash[:], raw[48:80])
	copy(b.parent[:], raw[80:112])
	start := le.Uint32(raw[112:])
	tokens := le.Uint32(raw[116:])
	hidden := le.Uint32(raw[120:])
	floats := le.Uint64(raw[124:])
	switch {
	case tokens == 0 || tokens > maxFileTokens:
		return Hash{}, nil, bad("%d tokens", tokens)
	case start > math.MaxInt32:
		return Hash{}, nil, bad("start position %d", start)
	case floats > maxFileFloats:
		return Hash{}, nil, bad("%d state values", floats)
	case hidden > maxFileTokens*16:
		return Hash{}, nil, bad("hidden state of %d values", hidden)
	case !b.mtp && hidden != 0:
		return Hash{}, nil, bad("a hidden state without MTP rows")
	}
	if want := fileSize(int(tokens), int(floats), int(hidden)); int64(len(raw)) != want {
		return Hash{}, nil, bad("%d bytes, the header declares %d", len(raw), want)
	}
	body := len(raw) - 4
	if sum, want := crc32.Checksum(raw[:body], castagnoli), le.Uint32(raw[body:]); sum != want {
		return Hash{}, nil, bad("checksum %08x, the file says %08x", sum, want)
	}
	b.start = int(start)
	off := fixedHeader
	b.tokens = make([]int, tokens)
	for i := range b.tokens {
		b.tokens[i] = int(le.Uint32(raw[off:]))
		off += 4
	}
	b.data = decodeFloats(raw[off : off+4*int(floats)])
	off += 4 * int(floats)
	if b.mtp {
		b.hidden = decodeFloats(raw[off : off+4*int(hidden)])
	}
	return identity, b, nil
}

func decodeFloats(raw []byte) []float32 {
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}
