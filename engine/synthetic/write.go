package synthetic

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"

	"github.com/spoolhq/spool/engine/container"
)

// chunkBytes is the payload generated and written at a time.
const chunkBytes = 1 << 20

// holes says which payloads writeShard leaves as holes (the file extended
// over them without writing data, so that they read as zeros).
type holes uint8

const (
	holesNone    holes = iota // every payload written
	holesRouting              // all but the routing tensors' (the skeleton)
	holesAll                  // every payload a hole
)

func (h holes) hole(t tensor) bool {
	return t.hole || h == holesAll || h == holesRouting && !t.routing
}

// writeShard writes one safetensors file and returns its size and the
// payload bytes written (those not left as holes).
func writeShard(ctx context.Context, path string, ts []tensor, meta map[string]string, seed uint64, h holes) (size, written int64, err error) {
	specs := make([]container.TensorSpec, len(ts))
	for i, t := range ts {
		specs[i] = container.TensorSpec{Name: t.name, DType: t.dtype, Shape: t.shape}
	}
	w, err := container.NewWriter(path, specs, meta)
	if err != nil {
		return 0, 0, fmt.Errorf("synthetic: %w", err)
	}
	var buf []byte
	for _, t := range ts {
		if h.hole(t) {
			if err = w.Hole(t.size); err != nil {
				break
			}
			continue
		}
		if buf == nil {
			buf = make([]byte, chunkBytes)
		}
		if err = writePayload(ctx, w, t, seed, buf); err != nil {
			err = fmt.Errorf("synthetic: %s: tensor %q: %w", path, t.name, err)
			break
		}
		written += t.size
	}
	if err != nil {
		w.Close() // removes the partial file
		return 0, 0, err
	}
	if err := w.Close(); err != nil {
		return 0, 0, fmt.Errorf("synthetic: %w", err)
	}
	return w.Size(), written, nil
}

// tensorRNG is the generator of one tensor's values: a function of the
// seed and the tensor's name only, so values do not depend on the layout.
func tensorRNG(seed uint64, name string) *rand.PCG {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.NewPCG(seed, h.Sum64())
}

// writePayload generates t's payload chunk by chunk into buf and writes it.
func writePayload(ctx context.Context, w io.Writer, t tensor, seed uint64, buf []byte) error {
	rng := tensorRNG(seed, t.name)
	for off, left := int64(0), t.size; left > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(left, int64(len(buf)))
		if t.row > 0 {
			n = min(left, int64(len(buf))/t.row*t.row)
		}
		chunk := buf[:n]
		fillChunk(chunk, t, rng, off)
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		off += n
		left -= n
	}
	return nil
}

// fillChunk generates the len(chunk) bytes of t from byte off on (a
// multiple of 4 for float tensors, since chunks are 4-aligned, and of the
// row for fills drawn row by row), the next ones rng draws.
func fillChunk(chunk []byte, t tensor, rng *rand.PCG, off int64) {
	switch t.fill {
	case fillEye:
		fillEyeRows(chunk, t.row, off/t.row)
		return
	case fillConst:
		fillConstF32(chunk, t.base)
		return
	case fillBigram:
		// The random codes first, so that the rows not copied are those
		// of the plain lm_head.
		t.fill = fillInt8
		fillChunk(chunk, t, rng, off)
		t.bigram.fill(chunk, off/t.row)
		return
	case fillInt4, fillInt8:
		next := func() uint64 {
			if t.fill == fillInt4 {
				return symmetricInt4(rng.Uint64())
			}
			return symmetricInt8(rng.Uint64())
		}
		i := 0
		for ; i+8 <= len(chunk); i += 8 {
			binary.LittleEndian.PutUint64(chunk[i:], next())
		}
		if i < len(chunk) {
			var tail [8]byte
			binary.LittleEndian.PutUint64(tail[:], next())
			copy(chunk[i:], tail[:])
		}
		return
	case fillOnes:
		for i := 0; i+4 <= len(chunk); i += 4 {
			binary.LittleEndian.PutUint32(chunk[i:], math.Float32bits(1))
		}
		return
	case fillZeros:
		clear(chunk)
		return
	case fillNormalInt4:
		codes := normalCodes
		for i := 0; i < len(chunk); i += 2 {
			r := rng.Uint64()
			chunk[i] = codes[uint16(r)] | codes[uint16(r>>16)]<<4
			if i+1 < len(chunk) {
				chunk[i+1] = codes[uint16(r>>32)] | codes[uint16(r>>48)]<<4
			}
		}
		return
	}
	for i := 0; i+4 <= len(chunk); i += 4 {
		u := float32(rng.Uint64()>>40) / (1 << 24) // [0, 1)
		var v float32
		if t.fill == fillScales {
			v = t.base * (0.75 + 0.5*u)
		} else { // fillUniform: standard deviation base
			v = t.base * sqrt3 * (2*u - 1)
		}
		binary.LittleEndian.PutUint32(chunk[i:], math.Float32bits(v))
	}
}

// symmetricInt4 maps 16 uniform random nibbles to int4 codes symmetric
// about 0: the code 0 (value -8, which has no mirror) becomes 8 (value 0).
func symmetricInt4(u uint64) uint64 {
	z := ^u
	z &= z >> 1
	z &= z >> 2 // bit 0 of each nibble: the nibble was 0
	return u | (z&0x1111111111111111)<<3
}

// symmetricInt8 maps 8 uniform random bytes to int8 codes symmetric about
// 0: the code 0x80 (value -128, which has no mirror) becomes 0.
func symmetricInt8(u uint64) uint64 {
	for b := 0; b < 64; b += 8 {
		if byte(u>>b) == 0x80 {
			u &^= 0xff << b
		}
	}
	return u
}

// sqrt3 scales a uniform [-1, 1) value to unit standard deviation.
const sqrt3 = 1.7320508075688772
