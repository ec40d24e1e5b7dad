package benchmodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
)

// chunkBytes is the payload generated and written at a time.
const chunkBytes = 1 << 20

// encodeHeader builds a safetensors header for ts laid out back to back in
// order, padded with spaces so that the data section starts 8-aligned.
func encodeHeader(ts []tensor, meta map[string]string) ([]byte, int64) {
	var b bytes.Buffer
	b.WriteByte('{')
	if len(meta) > 0 {
		keys := make([]string, 0, len(meta))
		for k := range meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(&b, k)
			b.WriteByte(':')
			writeString(&b, meta[k])
		}
		b.WriteString("},")
	}
	var off int64
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, t.name)
		b.WriteString(`:{"dtype":`)
		writeString(&b, t.dtype)
		b.WriteString(`,"shape":[`)
		for j, d := range t.shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(d, 10))
		}
		b.WriteString(`],"data_offsets":[`)
		b.WriteString(strconv.FormatInt(off, 10))
		b.WriteByte(',')
		off += t.size
		b.WriteString(strconv.FormatInt(off, 10))
		b.WriteString("]}")
	}
	b.WriteByte('}')
	for (8+b.Len())%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes(), off
}

func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}

// writeShard writes one safetensors file and returns its size. With
// sparse the payloads are left as holes: the header is written and the
// file is extended to its full length without writing data.
func writeShard(ctx context.Context, path string, ts []tensor, meta map[string]string, seed uint64, sparse bool) (size int64, err error) {
	hdr, total := encodeHeader(ts, meta)
	tmp := path + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return 0, fmt.Errorf("benchmodel: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	size = 8 + int64(len(hdr)) + total
	bw := bufio.NewWriterSize(f, chunkBytes)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
	bw.Write(lenBuf[:])
	bw.Write(hdr)
	if !sparse {
		buf := make([]byte, chunkBytes)
		for _, t := range ts {
			if err := writePayload(ctx, bw, t, seed, buf); err != nil {
				return 0, fmt.Errorf("benchmodel: %s: tensor %q: %w", path, t.name, err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("benchmodel: %s: %w", path, err)
	}
	if sparse {
		if err := f.Truncate(size); err != nil {
			return 0, fmt.Errorf("benchmodel: %s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("benchmodel: %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("benchmodel: %w", err)
	}
	return size, nil
}

// tensorRNG is the generator of one tensor's values: a function of the
// seed and the tensor's name only, so values do not depend on the layout.
func tensorRNG(seed uint64, name string) *rand.PCG {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.NewPCG(seed, h.Sum64())
}

// writePayload generates t's payload chunk by chunk into buf and writes it.
func writePayload(ctx context.Context, w *bufio.Writer, t tensor, seed uint64, buf []byte) error {
	rng := tensorRNG(seed, t.name)
	for left := t.size; left > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(left, int64(len(buf)))
		if t.row > 0 {
			n = min(left, int64(len(buf))/t.row*t.row)
		}
		chunk := buf[:n]
		fillChunk(chunk, t, rng)
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		left -= n
	}
	return nil
}

// fillChunk generates the next len(chunk) bytes of t (a multiple of 4 for
// float tensors, since chunks are 4-aligned).
func fillChunk(chunk []byte, t tensor, rng *rand.PCG) {
	switch t.fill {
	case fillBytes:
		i := 0
		for ; i+8 <= len(chunk); i += 8 {
			binary.LittleEndian.PutUint64(chunk[i:], rng.Uint64())
		}
		if i < len(chunk) {
			var tail [8]byte
			binary.LittleEndian.PutUint64(tail[:], rng.Uint64())
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

// sqrt3 scales a uniform [-1, 1) value to unit standard deviation.
const sqrt3 = 1.7320508075688772
