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
	// Lanes is the number of interleaved states: byte i of a block is
	// coded by lane i mod Lanes.
	Lanes = kernels.RANSLanes
	// ScaleBits is the precision of the frequencies; Total their sum.
	ScaleBits = kernels.RANSScaleBits
	Total     = 1 << ScaleBits
	// StateBytes is the size of a block's initial states.
	StateBytes = 4 * Lanes
	// low is the renormalization bound: every state lies in [low, 2^32).
	low = kernels.RANSLow
)

// Table is a static model of one stream of bytes: the frequency of every
// byte value, summing to Total. A byte of frequency 0 cannot be coded.
type Table struct {
	Freq [256]uint16
}

// ErrCorrupt is wrapped by every error Decode returns for a coded block
// that is not what Encode produces.
var ErrCorrupt = errors.New("rans: corrupt coded block")

// NewTable normalizes a histogram into a table: every byte that occurs gets
// a frequency of at least 1, in proportion to its count, rounded so that
// the coded size grows the least. It fails when counts are all zero.
func NewTable(counts *[256]uint64) (Table, error) {
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
		t.Freq[s] = uint16(f)
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

// Bits is the coded size, in bits, of a stream with the histogram counts
// under t (without the block's states); +Inf when a counted byte has
// frequency 0.
func (t *Table) Bits(counts *[256]uint64) float64 {
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

// Histogram counts the bytes of p into counts.
func Histogram(counts *[256]uint64, p []byte) {
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
	for s := range counts {
		counts[s] += c[0][s] + c[1][s] + c[2][s] + c[3][s]
	}
}

// MaxEncodedLen bounds the coded size of n bytes: the states plus at most
// one word per byte.
func MaxEncodedLen(n int) int { return StateBytes + 2*n }

// Encode appends the coded form of src under t to dst: the Lanes final
// encoder states (little-endian uint32, the decoder's initial states),
// then the renormalization words (little-endian uint16) in the order the
// decoder reads them. It fails when src holds a byte of frequency 0.
func Encode(dst, src []byte, t *Table) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return dst, err
	}
	var start [256]uint32
	var acc uint32
	for s, f := range t.Freq {
		start[s] = acc
		acc += uint32(f)
	}
	var x [Lanes]uint32
	for l := range x {
		x[l] = low
	}
	words := make([]uint16, 0, len(src)/2+Lanes)
	for i := len(src) - 1; i >= 0; i-- {
		s := src[i]
		f := uint32(t.Freq[s])
		if f == 0 {
			return dst, fmt.Errorf("rans: byte %#02x at %d has frequency 0 in the table", s, i)
		}
		l := i % Lanes
		v := x[l]
		// Coding s from a state below f * 2^20 stays below 2^32 (64-bit
		// compare: for f = Total the bound is 2^32 itself).
		if uint64(v) >= uint64(f)<<(32-ScaleBits) {
			words = append(words, uint16(v))
			v >>= 16
		}
		x[l] = (v/f)<<ScaleBits + v%f + start[s]
	}
	slices.Reverse(words)
	out := slices.Grow(dst, StateBytes+2*len(words))
	for _, v := range x {
		out = binary.LittleEndian.AppendUint32(out, v)
	}
	for _, w := range words {
		out = binary.LittleEndian.AppendUint16(out, w)
	}
	return out, nil
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
		for j := 0; j < int(f); j++ {
			d.tab[slot] = uint32(s) | uint32(f-1)<<8 | uint32(j)<<20
			slot++
		}
	}
	return nil
}

// Decode decodes the coded block src into exactly len(out) bytes. It
// returns an error wrapping ErrCorrupt, and never panics, when src is not
// the coded form of len(out) bytes: states out of range, words missing or
// left over, or final states other than the encoder's start.
func (d *Decoder) Decode(out, src []byte) error {
	if len(src) < StateBytes || (len(src)-StateBytes)%2 != 0 {
		return fmt.Errorf("%w: %d bytes is not %d bytes of states plus whole words", ErrCorrupt, len(src), StateBytes)
	}
	var x [Lanes]uint32
	for l := range x {
		x[l] = binary.LittleEndian.Uint32(src[4*l:])
		if x[l] < low {
			return fmt.Errorf("%w: lane %d starts at %d, below %d", ErrCorrupt, l, x[l], low)
		}
	}
	words := src[StateBytes:]
	steps, p := kernels.RANSDecodeSteps(out, words, &x, &d.tab)
	for i := steps * Lanes; i < len(out); i++ {
		l := i % Lanes
		e := d.tab[x[l]&(Total-1)]
		out[i] = byte(e)
		v := (e>>8&(Total-1)+1)*(x[l]>>ScaleBits) + e>>20
		if v < low {
			if p+2 > len(words) {
				return fmt.Errorf("%w: words end at byte %d of %d", ErrCorrupt, i, len(out))
			}
			v = v<<16 | uint32(binary.LittleEndian.Uint16(words[p:]))
			p += 2
		}
		x[l] = v
	}
	if p != len(words) {
		return fmt.Errorf("%w: %d bytes of words left over", ErrCorrupt, len(words)-p)
	}
	for l, v := range x {
		if v != low {
			return fmt.Errorf("%w: lane %d ends at state %d, want %d", ErrCorrupt, l, v, low)
		}
	}
	return nil
}
