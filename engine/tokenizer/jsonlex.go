package tokenizer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON lexing under scan.go's decoders: each function reads one token or
// value at d[i] and returns where it ends, accepting exactly what
// encoding/json accepts and decoding strings to what it produces.

// syntaxError is a JSON syntax error at a byte offset of the file.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.off, e.msg) }

func errAt(d []byte, i int, want string) error {
	if i >= len(d) {
		return &syntaxError{off: i, msg: "unexpected end of input, want " + want}
	}
	return &syntaxError{off: i, msg: fmt.Sprintf("invalid character %q, want %s", d[i], want)}
}

// describe names the kind of the JSON value at d[i].
func describe(d []byte, i int) string {
	if i >= len(d) {
		return "missing"
	}
	switch c := d[i]; {
	case c == '"':
		return "a string"
	case c == '[':
		return "an array"
	case c == '{':
		return "an object"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	default:
		return "a number"
	}
}

func skipWS(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
		// Indented files have long runs of spaces: skip them eight at a time.
		for i+8 <= len(d) {
			if x := binary.LittleEndian.Uint64(d[i:]) ^ 0x2020202020202020; x != 0 {
				i += bits.TrailingZeros64(x) / 8
				break
			}
			i += 8
		}
	}
	return i
}

// specialBytes flags (with the high bit of each byte) the bytes of w, eight
// bytes of a JSON string, that end its plain run: a quote, a backslash or a
// control character. Bytes above the lowest flagged one may be flagged
// wrongly (a borrow carries into them); the lowest flag is exact.
func specialBytes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	less := func(x uint64, n uint64) uint64 { return (x - ones*n) & ^x & highs }
	return less(w, ' ') | less(w^(ones*'"'), 1) | less(w^(ones*'\\'), 1)
}

func hasLiteral(d []byte, i int, lit string) bool {
	return i <= len(d) && bytes.HasPrefix(d[i:], []byte(lit))
}

// appendString decodes the JSON string that starts at d[i] == '"', appends
// its value to dst and returns the index after the closing quote. The value is
// what encoding/json produces: invalid UTF-8 and unpaired surrogates become
// U+FFFD.
func appendString(dst, d []byte, i int) ([]byte, int, error) {
	// Fast path: find the first quote, backslash or control character eight
	// bytes at a time; a plain valid UTF-8 string ends at that quote.
	j := i + 1
	for j+8 <= len(d) {
		if m := specialBytes(binary.LittleEndian.Uint64(d[j:])); m != 0 {
			j += bits.TrailingZeros64(m) / 8
			break
		}
		j += 8
	}
	for j < len(d) && d[j] != '"' && d[j] != '\\' && d[j] >= ' ' {
		j++
	}
	if !utf8.Valid(d[i+1 : j]) {
		j = i + 1 // the slow path replaces invalid UTF-8
	} else if j < len(d) && d[j] == '"' {
		return append(dst, d[i+1:j]...), j + 1, nil
	}
	dst = append(dst, d[i+1:j]...)
	for j < len(d) {
		c := d[j]
		switch {
		case c == '"':
			return dst, j + 1, nil
		case c < ' ':
			return dst, 0, errAt(d, j, "no control character in a string")
		case c == '\\':
			if j+1 >= len(d) {
				return dst, 0, errAt(d, j+1, "an escape")
			}
			j++
			switch d[j] {
			case '"', '\\', '/':
				dst = append(dst, d[j])
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(d, j+1)
				if r < 0 {
					return dst, 0, errAt(d, j+1, "four hexadecimal digits after \\u")
				}
				j += 4
				if utf16.IsSurrogate(r) {
					// A valid pair is consumed whole; anything else leaves the
					// next escape to be decoded on its own.
					if j+2 < len(d) && d[j+1] == '\\' && d[j+2] == 'u' {
						if dec := utf16.DecodeRune(r, hex4(d, j+3)); dec != utf8.RuneError {
							dst = utf8.AppendRune(dst, dec)
							j += 7
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
			default:
				return dst, 0, errAt(d, j, "a valid escape character")
			}
			j++
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			j++
		default:
			r, size := utf8.DecodeRune(d[j:])
			dst = utf8.AppendRune(dst, r)
			j += size
		}
	}
	return dst, 0, errAt(d, j, "the closing quote of a string")
}

// hex4 reads four hexadecimal digits at d[i], or returns -1.
func hex4(d []byte, i int) rune {
	if i+4 > len(d) {
		return -1
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// smallInt reads a non-negative JSON integer of at most 9 digits at d[i],
// the common case of readInt; ok is false for anything else.
func smallInt(d []byte, i int) (n, end int, ok bool) {
	j := i
	for j < len(d) && j-i < 10 && d[j] >= '0' && d[j] <= '9' {
		n = n*10 + int(d[j]-'0')
		j++
	}
	if j == i || j-i == 10 || d[i] == '0' && j-i > 1 {
		return 0, 0, false
	}
	if j < len(d) && (d[j] == '.' || d[j] == 'e' || d[j] == 'E') {
		return 0, 0, false
	}
	return n, j, true
}

// readInt reads a JSON number at d[i] that must be an integer fitting an int,
// as encoding/json requires when decoding into an int.
func readInt(d []byte, i int) (int, int, error) {
	if i < len(d) && d[i] != '-' && (d[i] < '0' || d[i] > '9') {
		return 0, 0, fmt.Errorf("want an integer id, found %s", describe(d, i))
	}
	end, err := skipNumber(d, i)
	if err != nil {
		return 0, 0, err
	}
	num := d[i:end]
	digits := num
	if digits[0] == '-' {
		digits = digits[1:]
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, 0, fmt.Errorf("id %s is not an integer", num)
		}
	}
	// JSON integers have no leading zeros, so 20 digits exceed any int64.
	if len(digits) > 19 {
		return 0, 0, fmt.Errorf("id %s overflows an integer", num)
	}
	var n uint64
	for _, c := range digits {
		n = n*10 + uint64(c-'0')
	}
	if len(num) > len(digits) {
		if n > uint64(math.MaxInt)+1 {
			return 0, 0, fmt.Errorf("id %s overflows an integer", num)
		}
		return int(-int64(n)), end, nil
	}
	if n > math.MaxInt {
		return 0, 0, fmt.Errorf("id %s overflows an integer", num)
	}
	return int(n), end, nil
}

// skipNumber returns the end of the JSON number at d[i].
func skipNumber(d []byte, i int) (int, error) {
	digits := func(j int) int {
		for j < len(d) && d[j] >= '0' && d[j] <= '9' {
			j++
		}
		return j
	}
	j := i
	if j < len(d) && d[j] == '-' {
		j++
	}
	switch {
	case j < len(d) && d[j] == '0':
		j++
	case j < len(d) && d[j] >= '1' && d[j] <= '9':
		j = digits(j)
	default:
		return 0, errAt(d, j, "a digit")
	}
	if j < len(d) && d[j] == '.' {
		k := digits(j + 1)
		if k == j+1 {
			return 0, errAt(d, k, "a digit after '.'")
		}
		j = k
	}
	if j < len(d) && (d[j] == 'e' || d[j] == 'E') {
		j++
		if j < len(d) && (d[j] == '+' || d[j] == '-') {
			j++
		}
		k := digits(j)
		if k == j {
			return 0, errAt(d, k, "a digit in an exponent")
		}
		j = k
	}
	return j, nil
}

// skipValue validates the JSON value at d[i] and returns its end. depth is
// the nesting depth the value has if it is an object or array (the document
// itself has depth 1), for encoding/json's limit.
func skipValue(d []byte, i, depth int) (int, error) {
	if i >= len(d) {
		return 0, errAt(d, i, "a value")
	}
	if (d[i] == '{' || d[i] == '[') && depth > maxDepth {
		return 0, &syntaxError{off: i, msg: "exceeded max depth"}
	}
	switch c := d[i]; {
	case c == '"':
		// Validation only; the decoded value is dropped.
		return skipString(d, i)
	case c == '{':
		return walkObject(d, i, func(_ string, v int) (int, error) { return skipValue(d, v, depth+1) })
	case c == '[':
		i = skipWS(d, i+1)
		if i < len(d) && d[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(d, i, depth+1); err != nil {
				return 0, err
			}
			i = skipWS(d, i)
			if i < len(d) && d[i] == ',' {
				i = skipWS(d, i+1)
				continue
			}
			if i < len(d) && d[i] == ']' {
				return i + 1, nil
			}
			return 0, errAt(d, i, "',' or ']' after an array element")
		}
	case c == 't':
		return skipLiteral(d, i, "true")
	case c == 'f':
		return skipLiteral(d, i, "false")
	case c == 'n':
		return skipLiteral(d, i, "null")
	default:
		return skipNumber(d, i)
	}
}

func skipLiteral(d []byte, i int, lit string) (int, error) {
	if !hasLiteral(d, i, lit) {
		return 0, &syntaxError{off: i, msg: "invalid literal, want " + lit}
	}
	return i + len(lit), nil
}

// skipString validates the JSON string at d[i] == '"' and returns its end.
func skipString(d []byte, i int) (int, error) {
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return j + 1, nil
		case c < ' ':
			return 0, errAt(d, j, "no control character in a string")
		case c == '\\':
			j++
			if j >= len(d) {
				return 0, errAt(d, j, "an escape")
			}
			switch d[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if hex4(d, j+1) < 0 {
					return 0, errAt(d, j+1, "four hexadecimal digits after \\u")
				}
				j += 4
			default:
				return 0, errAt(d, j, "a valid escape character")
			}
		}
	}
	return 0, errAt(d, len(d), "the closing quote of a string")
}
