package rans

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/spoolhq/spool/kernels"
)

// Geometry of the coder.
const (
	// Lanes is the number of interleaved states: nibble j of a block (the
	// low nibble of byte j/2 when j is even, else its high nibble) is
	// coded by lane j mod Lanes.
	Lanes = kernels.RANSLanes
	// Symbols is the alphabet: the 16 nibbles.
	Symbols = kernels.RANSSymbols
	// ScaleBits is the precision of the frequencies; Total their sum.
	ScaleBits = kernels.RANSScaleBits
	Total     = kernels.RANSTotal
	// StateBytes is the size of a block's initial states.
	StateBytes = 2 * Lanes
	// low is the renormalization bound: every state lies in [low, 2^16).
	low = kernels.RANSLow
)

// Table is a static model of one stream of nibbles: the frequency of every
// nibble value, summing to Total. A nibble of frequency 0 cannot be coded.
type Table struct {
	Freq [Symbols]uint8
}

// ErrCorrupt is wrapped by every error Decode returns for a coded block
// that is not what Encode produces.
var ErrCorrupt = errors.New("rans: corrupt coded block")

// NewTable normalizes a histogram of nibbles into a table: every nibble
// that occurs gets a frequency of at least 1, in proportion to its count,
// rounded so that the coded size grows the least. It fails when counts are
// all zero.
func NewTable(counts *[Symbols]uint64) (Table, error) {
	var total uint64
	for _, c := range counts {
		if total+c < total {
			return Table{}, errors.New("rans: histogram total overflows")
		}
		total += c
	}
	if total == 0 {
		return Table{}, errors.New("rans: empty histogram")
	}
	var t Table
	sum := 0
	for s, c := range counts {
		if c == 0 {
			continue
		}
		f := int(math.Round(float64(c) * Total / float64(total)))
		f = min(max(f, 1), Total)
		t.Freq[s] = uint8(f)
		sum += f
	}
	// Fix the rounding one unit at a time where the cost in coded bits is
	// least: raising the frequency of the symbol that gains most, or
	// lowering the one (above 1) that loses least.
	for sum != Total {
		best, bestCost := -1, math.Inf(1)
		for s, c := range counts {
			f := float64(t.Freq[s])
			if c == 0 {
				continue
			}
			var cost float64
			if sum < Total {
				cost = -float64(c) * math.Log2((f+1)/f)
			} else {
				if t.Freq[s] <= 1 {
					continue
				}
				cost = float64(c) * math.Log2(f/(f-1))
			}
			if cost < bestCost {
				best, bestCost = s, cost
			}
		}
		if sum < Total {
			t.Freq[best]++
			sum++
		} else {
			t.Freq[best]--
			sum--
		}
	}
	return t, nil
}

// Validate checks that the frequencies sum to Total.
func (t *Table) Validate() error {
	sum := 0
	for _, f := range t.Freq {
		sum += int(f)
	}
	if sum != Total {
		return fmt.Errorf("%w: table frequencies sum to %d, want %d", ErrCorrupt, sum, Total)
	}
	return nil
}

// Bits is the coded size, in bits, of a stream with the nibble histogram
// counts under t (without the block's states); +Inf when a counted nibble
// has frequency 0.
func (t *Table) Bits(counts *[Symbols]uint64) float64 {
	var bits float64
	for s, c := range counts {
		if c == 0 {
			continue
		}
		if t.Freq[s] == 0 {
			return math.Inf(1)
		}
		bits += float64(c) * (ScaleBits - math.Log2(float64(t.Freq[s])))
	}
	return bits
}

// Histogram counts the nibbles of p (two a byte) into counts.
func Histogram(counts *[Symbols]uint64, p []byte) {
	var c [4][256]uint64 // four tables break the store-to-load dependency
	i := 0
	for ; i+4 <= len(p); i += 4 {
		c[0][p[i]]++
		c[1][p[i+1]]++
		c[2][p[i+2]]++
		c[3][p[i+3]]++
	}
	for ; i < len(p); i++ {
		c[0][p[i]]++
	}
	for b := range 256 {
		n := c[0][b] + c[1][b] + c[2][b] + c[3][b]
		counts[b&15] += n
		counts[b>>4] += n
	}
}

// MaxEncodedLen bounds the coded size of n bytes: the states plus at most
// one byte per nibble.
func MaxEncodedLen(n int) int { return StateBytes + 2*n }

// Encode appends the coded form of src under t to dst: the Lanes final
// encoder states (little-endian uint16, the decoder's initial states),
// then the renormalization bytes in the order the decoder reads them. It
// fails when src holds a nibble of frequency 0. It runs the kernels'
// encoder (C where cgo is on).
func Encode(dst, src []byte, t *Table) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return dst, err
	}
	// The stream is written at the end of the room after the states, then
	// moved down to follow them.
	at := len(dst)
	out := slices.Grow(dst, MaxEncodedLen(len(src))+1)[:at+MaxEncodedLen(len(src))+1]
	var x [Lanes]uint16
	stream, ok := kernels.RANSEncode(out[at+StateBytes:], src, &t.Freq, &x)
	if !ok {
		return dst, zeroNibble(src, t)
	}
	for l, v := range x {
		binary.LittleEndian.PutUint16(out[at+2*l:], v)
	}
	n := copy(out[at+StateBytes:], stream)
	return out[:at+StateBytes+n], nil
}

// zeroNibble names the first nibble of src whose frequency in t is 0.
func zeroNibble(src []byte, t *Table) error {
	for j := 0; j < 2*len(src); j++ {
		if s := src[j>>1] >> (4 * (j & 1)) & 15; t.Freq[s] == 0 {
			return fmt.Errorf("rans: nibble %#x at %d has frequency 0 in the table", s, j)
		}
	}
	return errors.New("rans: internal error: the encoder refused a codable block")
}

// Decoder decodes blocks coded under one Table. It is safe for concurrent
// use.
type Decoder struct {
	tab kernels.RANSTable
}

// NewDecoder builds the decode table of t.
func NewDecoder(t *Table) (*Decoder, error) {
	d := &Decoder{}
	if err := d.Reset(t); err != nil {
		return nil, err
	}
	return d, nil
}

// Reset rebuilds d for table t, so that decoders can be reused.
func (d *Decoder) Reset(t *Table) error {
	if err := t.Validate(); err != nil {
		return err
	}
	slot := 0
	for s, f := range t.Freq {
		d.tab.Freq[s], d.tab.Start[s] = f, uint8(slot)
		for range f {
			d.tab.Sym[slot] = uint8(s)
			slot++
		}
	}
	return nil
}

// Loop is one implementation of the decode loop (the kernels'): the Go
// reference or a SIMD loop. The zero Loop is the fastest this machine runs.
type Loop = kernels.RANSLoop

// Loops lists the decode loops this machine runs, the Go reference first
// and the zero Loop's last. All decode every block identically; they
// differ in speed (spool bench stream measures each).
func Loops() []Loop { return kernels.RANSLoops() }

// Decode decodes the coded block src into exactly len(out) bytes. It
// returns an error wrapping ErrCorrupt, and never panics, when src is not
// the coded form of len(out) bytes: states out of range, bytes missing or
// left over, or final states other than the encoder's start.
func (d *Decoder) Decode(out, src []byte) error { return d.DecodeWith(Loop{}, out, src) }

// DecodeWith is Decode with the decode loop l.
func (d *Decoder) DecodeWith(l Loop, out, src []byte) error {
	if len(src) < StateBytes {
		return fmt.Errorf("%w: %d bytes is shorter than the %d bytes of states", ErrCorrupt, len(src), StateBytes)
	}
	var x [Lanes]uint16
	for l := range x {
		x[l] = binary.LittleEndian.Uint16(src[2*l:])
		if x[l] < low {
			return fmt.Errorf("%w: lane %d starts at %d, below %d", ErrCorrupt, l, x[l], low)
		}
	}
	stream := src[StateBytes:]
	nibbles, used := l.Decode(out, stream, &x, &d.tab)
	if nibbles < 2*len(out) {
		return fmt.Errorf("%w: the stream ends at byte %d of %d", ErrCorrupt, nibbles/2, len(out))
	}
	if used != len(stream) {
		return fmt.Errorf("%w: %d bytes of the stream left over", ErrCorrupt, len(stream)-used)
	}
	for l, v := range x {
		if v != low {
			return fmt.Errorf("%w: lane %d ends at state %d, want %d", ErrCorrupt, l, v, low)
		}
	}
	return nil
}
