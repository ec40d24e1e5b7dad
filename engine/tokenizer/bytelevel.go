package tokenizer

import "unicode/utf8"

// byteToRune is GPT-2's bytes_to_unicode table: printable bytes stand for
// themselves, the others are shifted to U+0100 and up, in byte order.
var byteToRune = func() [256]rune {
	var tab [256]rune
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			tab[b] = rune(b)
		} else {
			tab[b] = rune(256 + n)
			n++
		}
	}
	return tab
}()

// runeToByte inverts byteToRune; every rune it covers is below U+0144.
var runeToByte = func() [324]int16 {
	var tab [324]int16
	for i := range tab {
		tab[i] = -1
	}
	for b, r := range byteToRune {
		tab[r] = int16(b)
	}
	return tab
}()

// appendByteLevel appends the byte-level form of raw bytes (each byte as its
// byteToRune character) to dst.
func appendByteLevel(dst, raw []byte) []byte {
	for _, b := range raw {
		dst = utf8.AppendRune(dst, byteToRune[b])
	}
	return dst
}

// appendByteLevelDecode appends what HF's ByteLevel decoder makes of one
// token: its characters mapped back to bytes, or the token's own UTF-8 bytes
// when some character is outside the byte-level alphabet.
func appendByteLevelDecode(dst []byte, s string) []byte {
	start := len(dst)
	for i := 0; i < len(s); {
		// Every character of the alphabet is below U+0144: one or two bytes.
		r := rune(s[i])
		n := 1
		if r >= utf8.RuneSelf {
			if r < 0xC2 || r > 0xDF || i+1 >= len(s) || s[i+1]&0xC0 != 0x80 {
				return append(dst[:start], s...)
			}
			r, n = (r&0x1F)<<6|rune(s[i+1]&0x3F), 2
		}
		if int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return append(dst[:start], s...)
		}
		dst = append(dst, byte(runeToByte[r]))
		i += n
	}
	return dst
}

// appendLossy appends src to dst as valid UTF-8, replacing each maximal
// invalid subsequence with U+FFFD exactly as Rust's String::from_utf8_lossy
// does. If final is false, an incomplete but so far valid sequence at the end
// is not converted; its length is returned as held.
func appendLossy(dst, src []byte, final bool) (out []byte, held int) {
	i := 0
	for i < len(src) {
		c := src[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		n, st := validSeqLen(src[i:])
		switch {
		case st == seqComplete:
			dst = append(dst, src[i:i+n]...)
		case st == seqTruncated && !final:
			return dst, n
		default:
			dst = append(dst, "\uFFFD"...)
		}
		i += n
	}
	return dst, 0
}

type seqStatus int

const (
	seqComplete  seqStatus = iota // a whole valid character
	seqInvalid                    // an invalid sequence
	seqTruncated                  // a valid prefix cut off by the end of the input
)

// validSeqLen inspects the multi-byte sequence that starts at s[0] (a byte
// >= 0x80). For a whole valid character it returns its length. Otherwise it
// returns the length of the maximal valid prefix (at least 1), which is the
// part Rust replaces with a single U+FFFD.
func validSeqLen(s []byte) (int, seqStatus) {
	c := s[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 2
	case c == 0xE0:
		need, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 3
	case c == 0xED:
		need, hi = 3, 0x9F
	case c == 0xF0:
		need, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 4
	case c == 0xF4:
		need, hi = 4, 0x8F
	default:
		return 1, seqInvalid
	}
	for k := 1; k < need; k++ {
		if k >= len(s) {
			return k, seqTruncated
		}
		b := s[k]
		if k == 1 {
			if b < lo || b > hi {
				return 1, seqInvalid
			}
		} else if b < 0x80 || b > 0xBF {
			return k, seqInvalid
		}
	}
	return need, seqComplete
}
