package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// glmMatchEnd returns the end of the match of glmPattern that starts at s[i]
// (i < len(s)), following Oniguruma's leftmost-first, backtracking semantics:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)       contractions
//	[^\r\n\p{L}\p{N}]?\p{L}+           a word, with one leading non-letter
//	\p{N}{1,3}                         up to three digits
//	 ?[^\s\p{L}\p{N}]+[\r\n]*          punctuation, with one leading space
//	\s*[\r\n]+                         whitespace up to the last line break
//	\s+(?!\S)                          whitespace not followed by a non-space
//	\s+                                whitespace
//
// Every character starts a match of one of the alternatives, so the matches
// tile the text and the Isolated split has no gaps. An invalid UTF-8 byte
// counts as one punctuation-like character.
func glmMatchEnd(s string, i int) int {
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == '\'' {
		if n := contractionLen(s[i+w:]); n > 0 {
			return i + w + n
		}
	}
	if isL(r) {
		return letterRunEnd(s, i)
	}
	if isN(r) {
		j := i
		for k := 0; k < 3 && j < len(s); k++ {
			r2, w2 := utf8.DecodeRuneInString(s[j:])
			if !isN(r2) {
				break
			}
			j += w2
		}
		return j
	}
	// r is whitespace or "other" (neither letter, number nor whitespace).
	if r != '\r' && r != '\n' && i+w < len(s) {
		if r2, _ := utf8.DecodeRuneInString(s[i+w:]); isL(r2) {
			return letterRunEnd(s, i+w)
		}
	}
	j := i
	if r == ' ' {
		j = i + w
	}
	if j < len(s) {
		if r2, _ := utf8.DecodeRuneInString(s[j:]); isOther(r2) {
			for j < len(s) {
				r3, w3 := utf8.DecodeRuneInString(s[j:])
				if !isOther(r3) {
					break
				}
				j += w3
			}
			for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
				j++
			}
			return j
		}
	}
	// r is whitespace. Scan the whole whitespace run.
	end, lastBreak, lastStart := i, -1, i
	for end < len(s) {
		r2, w2 := utf8.DecodeRuneInString(s[end:])
		if !unicode.IsSpace(r2) {
			break
		}
		if r2 == '\r' || r2 == '\n' {
			lastBreak = end
		}
		lastStart = end
		end += w2
	}
	switch {
	case lastBreak >= 0: // \s*[\r\n]+
		return lastBreak + 1
	case end == len(s): // \s+(?!\S) at the end of the text
		return end
	case lastStart > i: // \s+(?!\S): all but the last whitespace character
		return lastStart
	default: // \s+
		return end
	}
}

// contractionLen matches (?i:s|t|re|ve|m|ll|d) at the start of s (the text
// after an apostrophe) and returns the match length, or 0. Case-insensitive
// matching follows Unicode simple case folding, under which U+017F (ſ) is s.
func contractionLen(s string) int {
	if s == "" {
		return 0
	}
	if len(s) >= 2 && s[0] == 0xC5 && s[1] == 0xBF { // U+017F
		return 2
	}
	switch lower(s[0]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) >= 2 && lower(s[1]) == 'e' {
			return 2
		}
	case 'l':
		if len(s) >= 2 && lower(s[1]) == 'l' {
			return 2
		}
	}
	return 0
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func letterRunEnd(s string, j int) int {
	for j < len(s) {
		if c := s[j]; c < utf8.RuneSelf {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				break
			}
			j++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[j:])
		if !isL(r) {
			break
		}
		j += w
	}
	return j
}

func isL(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	return unicode.IsLetter(r) || unicode.Is(unicode16Letters, r)
}

func isN(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= '0' && r <= '9'
	}
	return unicode.IsNumber(r) || unicode.Is(unicode16Numbers, r)
}

func isOther(r rune) bool { return !unicode.IsSpace(r) && !isL(r) && !isN(r) }
