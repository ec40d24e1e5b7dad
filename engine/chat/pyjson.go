package chat

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spoolhq/spool/engine/chat/internal/jinja"
)

// dumpOptions are the keyword arguments of Python's json.dumps that the
// Hugging Face tojson filter forwards.
type dumpOptions struct {
	ensureASCII bool
	indent      string
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
	// maxBytes bounds the output.
	maxBytes int
}

// tojsonFilter implements transformers' tojson filter:
// tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
// which is json.dumps with those arguments, refusing output of more than
// maxBytes.
func tojsonFilter(maxBytes int) func(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	return func(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
		return tojson(args, kwargs, maxBytes)
	}
}

func tojson(args []jinja.Value, kwargs map[string]jinja.Value, maxBytes int) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Value{}, fmt.Errorf("tojson: missing value")
	}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	if len(args)-1 > len(names) {
		return jinja.Value{}, fmt.Errorf("tojson: takes at most %d arguments, found %d", len(names), len(args)-1)
	}
	params := make(map[string]jinja.Value, len(names))
	for i, a := range args[1:] {
		params[names[i]] = a
	}
	for k, v := range kwargs {
		if !slices.Contains(names, k) {
			return jinja.Value{}, fmt.Errorf("tojson: unexpected keyword argument %q", k)
		}
		if _, dup := params[k]; dup {
			return jinja.Value{}, fmt.Errorf("tojson: argument %q given twice", k)
		}
		params[k] = v
	}

	o := dumpOptions{maxBytes: maxBytes}
	if v, ok := params["ensure_ascii"]; ok {
		o.ensureASCII = v.IsTruthy()
	}
	if v, ok := params["sort_keys"]; ok {
		o.sortKeys = v.IsTruthy()
	}
	if v, ok := params["indent"]; ok && !v.IsNone() && !v.IsUndefined() {
		o.hasIndent = true
		switch {
		case v.IsInt():
			o.indent = strings.Repeat(" ", int(max(0, min(v.AsInt(), 64))))
		case v.IsString():
			o.indent = v.AsString()
		default:
			return jinja.Value{}, fmt.Errorf("tojson: indent must be an int or a string, found %s", v.String())
		}
	}
	o.itemSep, o.keySep = ", ", ": "
	if o.hasIndent {
		o.itemSep = ","
	}
	if v, ok := params["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return jinja.Value{}, fmt.Errorf("tojson: separators must be two strings, found %s", v.String())
		}
		o.itemSep, o.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}

	var b strings.Builder
	if err := dumpValue(&b, args[0], o, 0); err != nil {
		return jinja.Value{}, fmt.Errorf("tojson: %w", err)
	}
	return jinja.NewString(b.String()), nil
}

// dumpValue writes v as Python's json.dumps would.
func dumpValue(b *strings.Builder, v jinja.Value, o dumpOptions, level int) error {
	if level > 512 {
		return fmt.Errorf("%w: the value is nested deeper than 512 levels (does it contain itself?)", ErrTemplateLimit)
	}
	if b.Len() > o.maxBytes {
		return fmt.Errorf("%w: the JSON text would be larger than %d bytes", ErrTemplateLimit, o.maxBytes)
	}
	switch {
	case v.IsUndefined(), v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloat(v.AsFloat(), true))
	case v.IsString():
		writePyString(b, v.AsString(), o.ensureASCII)
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			writeNewline(b, o, level+1)
			if err := dumpValue(b, item, o, level+1); err != nil {
				return err
			}
		}
		writeNewline(b, o, level)
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if o.sortKeys {
			slices.Sort(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			writeNewline(b, o, level+1)
			writePyString(b, k, o.ensureASCII)
			b.WriteString(o.keySep)
			val, _ := d.Get(k)
			if err := dumpValue(b, val, o, level+1); err != nil {
				return err
			}
		}
		writeNewline(b, o, level)
		b.WriteByte('}')
	default:
		return fmt.Errorf("object %s is not JSON serializable", v.String())
	}
	return nil
}

func writeNewline(b *strings.Builder, o dumpOptions, level int) {
	if !o.hasIndent {
		return
	}
	b.WriteByte('\n')
	for range level {
		b.WriteString(o.indent)
	}
}

// pyFloat formats f like Python's repr(float); inJSON selects json.dumps's
// spellings of the non-finite values.
func pyFloat(f float64, inJSON bool) string {
	switch {
	case math.IsNaN(f):
		if inJSON {
			return "NaN"
		}
		return "nan"
	case math.IsInf(f, 1):
		if inJSON {
			return "Infinity"
		}
		return "inf"
	case math.IsInf(f, -1):
		if inJSON {
			return "-Infinity"
		}
		return "-inf"
	}
	// Shortest round-tripping digits; Python switches to exponent
	// notation when the decimal exponent is below -4 or at least 16.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// writePyString writes s as a JSON string the way Python's json module
// does: with ensure_ascii every character outside ' '..'~' is escaped
// (astral ones as surrogate pairs); without it only '"', '\\' and control
// characters are.
func writePyString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				if c < 0x20 || (ensureASCII && c == 0x7f) {
					fmt.Fprintf(b, `\u%04x`, c)
				} else {
					b.WriteByte(c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !ensureASCII {
			b.WriteString(s[i : i+size])
		} else if r >= 0x10000 {
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		} else {
			fmt.Fprintf(b, `\u%04x`, r)
		}
		i += size
	}
	b.WriteByte('"')
}
