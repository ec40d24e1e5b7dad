package grammar

// The lexers of string and number values, one byte at a time.

func stepString(f *frame, n *node, b byte) int {
	if b == '"' && f.esc == escNone && f.u8 == 0 {
		if f.count >= n.minLen {
			return resPop
		}
		return resReject
	}
	return stringByte(f, b, n.maxLen)
}

// stringByte feeds a byte of string content (not the closing quote) to the
// lexer in f, counting characters in f.count up to maxLen (-1: no limit).
func stringByte(f *frame, b byte, maxLen int32) int {
	if f.u8 != 0 {
		return continuation(f, b)
	}
	switch f.esc {
	case escNone:
	case escSlash:
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			f.esc = escNone
		case 'u':
			f.esc = escU1
		default:
			return resReject
		}
		return resStay
	case escU1, escU2, escU2D, escU3, escU4:
		if !isHex(b) {
			return resReject
		}
		switch f.esc {
		case escU1:
			f.esc = escU2
			if b == 'd' || b == 'D' {
				f.esc = escU2D
			}
		case escU2D:
			if b > '7' {
				return resReject // D800..DFFF: surrogates
			}
			f.esc = escU3
		case escU2:
			f.esc = escU3
		case escU3:
			f.esc = escU4
		default:
			f.esc = escNone
		}
		return resStay
	default:
		return resReject
	}
	// A new character.
	if b < 0x20 || b == '"' || (maxLen >= 0 && f.count >= maxLen) {
		return resReject
	}
	if b == '\\' {
		f.esc = escSlash
		f.count++
		return resStay
	}
	return startChar(f, b)
}

// continuation feeds a UTF-8 continuation byte the lexer in f expects.
func continuation(f *frame, b byte) int {
	lo, hi := byte(0x80), byte(0xbf)
	switch f.u8 >> 2 {
	case u8E0:
		lo = 0xa0
	case u8ED:
		hi = 0x9f
	case u8F0:
		lo = 0x90
	case u8F4:
		hi = 0x8f
	}
	if b < lo || b > hi {
		return resReject
	}
	f.u8 = (f.u8 & 3) - 1 // later continuation bytes are of class u8Any
	return resStay
}

// startChar feeds the first byte of a character (ASCII or a UTF-8 lead
// byte) and counts the character.
func startChar(f *frame, b byte) int {
	switch {
	case b < 0x80:
	case b >= 0xc2 && b <= 0xdf:
		f.u8 = 1
	case b == 0xe0:
		f.u8 = 2 | u8E0<<2
	case b == 0xed:
		f.u8 = 2 | u8ED<<2
	case b >= 0xe1 && b <= 0xef:
		f.u8 = 2
	case b == 0xf0:
		f.u8 = 3 | u8F0<<2
	case b >= 0xf1 && b <= 0xf3:
		f.u8 = 3
	case b == 0xf4:
		f.u8 = 3 | u8F4<<2
	default:
		return resReject
	}
	f.count++
	return resStay
}

// rawByte feeds a byte of a raw string value: UTF-8 text without '<' (it
// would open markup around the value) and without control characters
// other than tab, newline and carriage return.
func rawByte(f *frame, n *node, b byte) int {
	if f.u8 != 0 {
		return continuation(f, b)
	}
	if b == '<' || b < 0x20 && b != '\t' && b != '\n' && b != '\r' || (n.maxLen >= 0 && f.count >= n.maxLen) {
		return resReject
	}
	return startChar(f, b)
}

// rawFirst is the set of bytes a raw string value can start with.
func rawFirst() byteSet {
	var s byteSet
	s.add('\t')
	s.add('\n')
	s.add('\r')
	s.addRange(0x20, 0x7f)
	s[0] &^= 1 << '<'
	s.addRange(0xc2, 0xf4)
	return s
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

func stepNumber(f *frame, n *node, b byte) int {
	if !n.bounded {
		return stepDigits(f, n, b)
	}
	was := *f
	res := stepDigits(f, n, b)
	switch {
	case res == resPopFeed && !n.inBounds(f.val):
		return resReject
	case res == resStay && b >= '0' && b <= '9':
		// The value gained a digit (or is 0 after "-").
		if b != '0' || was.phase != numSign {
			mag := abs(was.val)*10 + int64(b-'0')
			if was.phase == numSign || was.val < 0 {
				mag = -mag
			}
			f.val = mag
		}
		if !n.reachable(f) {
			*f = was
			return resReject
		}
	}
	return res
}

// inBounds reports whether a complete integer lies within the bounds.
func (n *node) inBounds(v int64) bool { return v >= n.lowest && v <= n.highest }

// reachable reports whether the integer in f, after its digits so far,
// can still end within the bounds (maxIntDigits digits at most).
func (n *node) reachable(f *frame) bool {
	switch f.phase {
	case numZero:
		return n.inBounds(0)
	case numSign:
		return n.lowest <= 0 && n.highest >= max(n.lowest, -maxIntValue)
	}
	// Digits may follow: the magnitude lies in [m*10^k, (m+1)*10^k-1].
	m := abs(f.val)
	for k, p := int32(0), int64(1); f.count+k <= maxIntDigits; k, p = k+1, p*10 {
		lo, hi := m*p, (m+1)*p-1
		if f.val < 0 {
			lo, hi = -hi, -lo
		}
		if lo <= n.highest && hi >= n.lowest {
			return true
		}
	}
	return false
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// stepDigits lexes a number.
func stepDigits(f *frame, n *node, b byte) int {
	digit := b >= '0' && b <= '9'
	frac := n.kind == kindNumber
	switch f.phase {
	case numSign:
		if b == '0' {
			f.phase = numZero
			return resStay
		}
		if digit {
			f.phase, f.count = numInt, 1
			return resStay
		}
		return resReject
	case numDot:
		if digit {
			f.phase, f.count = numFrac, 1
			return resStay
		}
		return resReject
	case numE:
		if b == '+' || b == '-' {
			f.phase = numESign
			return resStay
		}
		if digit {
			f.phase, f.count = numExp, 1
			return resStay
		}
		return resReject
	case numESign:
		if digit {
			f.phase, f.count = numExp, 1
			return resStay
		}
		return resReject
	case numInt:
		if digit && f.count < maxIntDigits {
			f.count++
			return resStay
		}
	case numFrac:
		if digit && f.count < maxFracDigits {
			f.count++
			return resStay
		}
	case numExp:
		if digit && f.count < maxExpDigits {
			f.count++
			return resStay
		}
		return resPopFeed
	}
	// numZero, numInt, numFrac: a fraction or exponent may follow.
	if frac && b == '.' && f.phase != numFrac {
		f.phase = numDot
		return resStay
	}
	if frac && (b == 'e' || b == 'E') {
		f.phase = numE
		return resStay
	}
	return resPopFeed
}
