package chat

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// prepareSource rewrites a chat template so that the engine renders it
// with Jinja2's lexer-level whitespace rules as transformers configures
// them (trim_blocks, lstrip_blocks, keep_trailing_newline=False, "-" and
// "+" markers).
//
// The engine applies whitespace control itself, but a marker there trims
// the nearest text even across an expression tag ("a {{ x }}{%- if %}"
// loses the space before the expression), which changes real templates
// such as GLM-5.2's "Reasoning Effort: {{ … }}". So the rules are applied
// here, as Jinja2's lexer does, and every piece of literal text becomes a
// string-literal expression; with no text segments left, the engine's own
// trimming has nothing to act on. Comments are dropped, raw blocks become
// literals, and the tojson filter is renamed to tojsonName (see Render).
func prepareSource(src string) string {
	// Jinja2 normalizes newlines and drops one trailing newline before
	// lexing.
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	src = strings.TrimSuffix(src, "\n")

	var out strings.Builder
	out.Grow(len(src) * 2)
	pos := 0
	// lineStarting is Jinja2's flag: the previous token ended with a
	// newline, or this is the start of the template.
	lineStarting := true
	// stripLead asks to strip the leading whitespace of the next text
	// (a "-" right marker).
	stripLead := false

	for {
		start, kind := nextTag(src, pos)
		text := src[pos:]
		if start >= 0 {
			text = src[pos:start]
		}
		if stripLead {
			text = strings.TrimLeftFunc(text, isPySpace)
			stripLead = false
		}
		if start < 0 {
			writeText(&out, text)
			return out.String()
		}

		open := start + 2
		leftSign := markerAt(src, open)
		if leftSign != 0 {
			open++
		}
		text = leftStrip(text, leftSign, kind != '{', lineStarting)
		writeText(&out, text)

		end, bodyEnd, rightSign := tagClose(src, open, kind)
		if end < 0 {
			// Unclosed tag: hand the rest to the engine, which reports it.
			out.WriteString(src[start:])
			return out.String()
		}
		body := src[open:bodyEnd]
		pos = end

		if kind == '%' && firstWord(body) == "raw" {
			pos, lineStarting, stripLead = rawBlock(&out, src, pos, rightSign)
			continue
		}

		switch kind {
		case '{':
			out.WriteString("{{ ")
			out.WriteString(renameInTag(body))
			out.WriteString(" }}")
		case '%':
			out.WriteString("{% ")
			out.WriteString(renameInTag(body))
			out.WriteString(" %}")
		}

		// Right side: "-" strips all following whitespace; a block or
		// comment tag without "+" drops one following newline.
		lineStarting = false
		switch {
		case rightSign == '-':
			ws := len(src[pos:]) - len(strings.TrimLeftFunc(src[pos:], isPySpace))
			lineStarting = ws > 0 && src[pos+ws-1] == '\n'
			pos += ws
		case rightSign == 0 && kind != '{' && strings.HasPrefix(src[pos:], "\n"):
			pos++
			lineStarting = true
		}
	}
}

// nextTag finds the next tag opener at or after pos and returns its index
// and kind ('{', '%' or '#'), or -1.
func nextTag(src string, pos int) (int, byte) {
	for {
		i := strings.IndexByte(src[pos:], '{')
		if i < 0 || pos+i+1 >= len(src) {
			return -1, 0
		}
		i += pos
		switch c := src[i+1]; c {
		case '{', '%', '#':
			return i, c
		}
		pos = i + 1
	}
}

// markerAt returns the whitespace-control marker ('-' or '+') at src[i].
func markerAt(src string, i int) byte {
	if i < len(src) && (src[i] == '-' || src[i] == '+') {
		return src[i]
	}
	return 0
}

// leftStrip applies a tag's left-side rule to the text before it: "-"
// strips all trailing whitespace; otherwise, for block and comment tags
// without "+", whitespace between the line start and the tag goes.
func leftStrip(text string, sign byte, block, lineStarting bool) string {
	if sign == '-' {
		return strings.TrimRightFunc(text, isPySpace)
	}
	if sign == '+' || !block {
		return text
	}
	lpos := strings.LastIndexByte(text, '\n') + 1
	if lpos > 0 || lineStarting {
		tail := text[lpos:]
		if tail != "" && strings.TrimLeftFunc(tail, isPySpace) == "" {
			return text[:lpos]
		}
	}
	return text
}

// tagClose finds the end of a tag whose body starts at pos: the index past
// the closer, the index where the body ends, and the right marker. Quoted
// strings are skipped except in comments. It returns end -1 when the tag
// is not closed.
func tagClose(src string, pos int, kind byte) (end, bodyEnd int, sign byte) {
	closer := "}}"
	switch kind {
	case '%':
		closer = "%}"
	case '#':
		closer = "#}"
	}
	for k := pos; k < len(src); k++ {
		c := src[k]
		if kind != '#' && (c == '\'' || c == '"') {
			for k++; k < len(src) && src[k] != c; k++ {
				if src[k] == '\\' {
					k++
				}
			}
			continue
		}
		if (c == '-' || c == '+') && strings.HasPrefix(src[k+1:], closer) {
			return k + 1 + len(closer), k, c
		}
		if strings.HasPrefix(src[k:], closer) {
			return k + len(closer), k, 0
		}
	}
	return -1, 0, 0
}

// rawBlock writes the content of a {% raw %} block, whose opening tag
// ended at pos with right marker sign, as a literal. It returns the
// position after {% endraw %} and the lexer state there.
func rawBlock(out *strings.Builder, src string, pos int, sign byte) (next int, lineStarting, stripLead bool) {
	// The opening tag takes following whitespace only with "-"; Jinja2
	// applies no trim_blocks to it.
	if sign == '-' {
		ws := len(src[pos:]) - len(strings.TrimLeftFunc(src[pos:], isPySpace))
		lineStarting = ws > 0 && src[pos+ws-1] == '\n'
		pos += ws
	}
	for k := pos; ; {
		i := strings.Index(src[k:], "{%")
		if i < 0 {
			writeText(out, src[pos:])
			return len(src), false, false
		}
		i += k
		open := i + 2
		leftSign := markerAt(src, open)
		if leftSign != 0 {
			open++
		}
		end, bodyEnd, rightSign := tagClose(src, open, '%')
		if end < 0 || firstWord(src[open:bodyEnd]) != "endraw" {
			k = i + 2
			continue
		}
		writeText(out, leftStrip(src[pos:i], leftSign, true, lineStarting))
		switch {
		case rightSign == '-':
			rest := strings.TrimLeftFunc(src[end:], isPySpace)
			ws := len(src[end:]) - len(rest)
			return end + ws, ws > 0 && src[end+ws-1] == '\n', false
		case rightSign == 0 && strings.HasPrefix(src[end:], "\n"):
			return end + 1, true, false
		}
		return end, false, false
	}
}

// writeText writes literal text as a string-literal expression.
func writeText(out *strings.Builder, text string) {
	if text == "" {
		return
	}
	out.WriteString(`{{ "`)
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '\\', '"':
			out.WriteByte('\\')
			out.WriteByte(c)
		default:
			out.WriteByte(c)
		}
	}
	out.WriteString(`" }}`)
}

// firstWord returns the leading identifier of a tag body.
func firstWord(body string) string {
	body = strings.TrimLeftFunc(body, isPySpace)
	n := 0
	for n < len(body) && isIdentByte(body, n) {
		n++
	}
	return body[:n]
}

// isPySpace reports whether r is whitespace to Python's str methods and
// its re module's \s.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// renameInTag renames the tojson filter to tojsonName outside string
// literals in one tag body.
func renameInTag(body string) string {
	if !strings.Contains(body, "tojson") {
		return body
	}
	var b strings.Builder
	for k := 0; k < len(body); k++ {
		c := body[k]
		switch {
		case c == '\'' || c == '"':
			start := k
			for k++; k < len(body) && body[k] != c; k++ {
				if body[k] == '\\' {
					k++
				}
			}
			b.WriteString(body[start:min(k+1, len(body))])
		case c == '|':
			b.WriteByte(c)
			n := k + 1
			for n < len(body) && strings.IndexByte(" \t\n", body[n]) >= 0 {
				n++
			}
			b.WriteString(body[k+1 : n])
			if strings.HasPrefix(body[n:], "tojson") && !isIdentByte(body, n+len("tojson")) {
				b.WriteString(tojsonName)
				k = n + len("tojson") - 1
			} else {
				k = n - 1
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isIdentByte(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= utf8.RuneSelf
}
