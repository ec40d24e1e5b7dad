package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// A GLM tokenizer.json is almost entirely model.vocab (an object of about 155k
// entries) and model.merges (an array of about 154k pairs). encoding/json
// spends more than a second on them, so splitDocument decodes those two values
// with a hand-written scanner and hands the rest of the file, with both
// replaced by null, to encoding/json. The scanner decodes strings exactly as
// encoding/json does (escapes, \u escapes with surrogate pairs, invalid surrogates and
// invalid UTF-8 become U+FFFD) and accepts exactly the JSON syntax it accepts.

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// maxFileSize bounds the size of a tokenizer.json (GLM-5.2's is 9 MB).
const maxFileSize = 1 << 30

// document is a tokenizer.json split into its hot parts and the rest.
type document struct {
	rest   []byte // the file with model.vocab and model.merges replaced by null
	vocab  vocabList
	merges mergeList
}

// vocabList holds the entries of model.vocab in file order, their keys packed
// into one string.
type vocabList struct {
	arena string
	ends  []uint32 // key k is arena[ends[k-1]:ends[k]] (ends[-1] = 0)
	ids   []int
}

func (v *vocabList) len() int { return len(v.ids) }

func (v *vocabList) key(k int) string {
	start := uint32(0)
	if k > 0 {
		start = v.ends[k-1]
	}
	return v.arena[start:v.ends[k]]
}

// mergeList holds the pairs of model.merges in file order. The two tokens of a
// pair are stored next to each other, so their concatenation (the merged token)
// is a slice too.
type mergeList struct {
	toks []byte
	ends []uint32 // pair k is a = toks[ends[2k-1]:ends[2k]], b = toks[ends[2k]:ends[2k+1]]
	// Problems found while decoding, reported by parseModel after the
	// vocabulary checks, in the order the encoding/json decoding reported them:
	// an element of the wrong JSON type first, then a malformed pair.
	typeErr  error
	shapeErr error
}

func (m *mergeList) len() int { return len(m.ends) / 2 }

// pair returns the two tokens of pair k and their concatenation.
func (m *mergeList) pair(k int) (a, b, ab []byte) {
	start := uint32(0)
	if k > 0 {
		start = m.ends[2*k-1]
	}
	mid, end := m.ends[2*k], m.ends[2*k+1]
	return m.toks[start:mid], m.toks[mid:end], m.toks[start:end]
}

// splitDocument decodes model.vocab and model.merges of a tokenizer.json and
// returns them with the rest of the document. Keys are matched exactly; a key
// that encoding/json would also match (another case, or twice) is rejected,
// since the two decodings would disagree about it. A document that is not an
// object is returned whole as the rest, for encoding/json to judge.
func splitDocument(data []byte) (*document, error) {
	// Decoded strings take at most three times their JSON size, and the
	// offsets into them are 32-bit.
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("file is %d bytes, more than the %d a tokenizer.json may have", len(data), maxFileSize)
	}
	doc := &document{rest: data}
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return doc, nil
	}
	var spans [][2]int // value spans to replace by null, in file order
	var seenModel bool
	_, err := walkObject(data, i, func(key string, v int) (int, error) {
		if key != "model" {
			if strings.EqualFold(key, "model") {
				return 0, fmt.Errorf("top-level key %q: only \"model\" is accepted", key)
			}
			return skipValue(data, v, 2)
		}
		if seenModel {
			return 0, errors.New(`top-level key "model" appears twice`)
		}
		seenModel = true
		if v >= len(data) || data[v] != '{' {
			return skipValue(data, v, 2) // encoding/json reports the type
		}
		var seenVocab, seenMerges bool
		return walkObject(data, v, func(key string, v int) (int, error) {
			var end int
			var err error
			switch {
			case key == "vocab":
				if seenVocab {
					return 0, errors.New(`model key "vocab" appears twice`)
				}
				seenVocab = true
				end, err = doc.vocab.decode(data, v)
			case key == "merges":
				if seenMerges {
					return 0, errors.New(`model key "merges" appears twice`)
				}
				seenMerges = true
				end, err = doc.merges.decode(data, v)
			case strings.EqualFold(key, "vocab"), strings.EqualFold(key, "merges"):
				return 0, fmt.Errorf("model key %q: only \"vocab\" and \"merges\" are accepted", key)
			default:
				return skipValue(data, v, 3)
			}
			if err == nil {
				spans = append(spans, [2]int{v, end})
			}
			return end, err
		})
	})
	if err != nil {
		return nil, err
	}
	if len(spans) > 0 {
		size := len(data)
		for _, s := range spans {
			size -= s[1] - s[0] - len("null")
		}
		rest := make([]byte, 0, size)
		prev := 0
		for _, s := range spans {
			rest = append(rest, data[prev:s[0]]...)
			rest = append(rest, "null"...)
			prev = s[1]
		}
		doc.rest = append(rest, data[prev:]...)
	}
	return doc, nil
}

// walkObject walks the object that starts at d[i] == '{', calling member for
// each key with the index of its value; member returns the end of the value.
func walkObject(d []byte, i int, member func(key string, v int) (int, error)) (int, error) {
	var key []byte
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return 0, errAt(d, i, "a string key")
		}
		var err error
		key, i, err = appendString(key[:0], d, i)
		if err != nil {
			return 0, err
		}
		i = skipWS(d, i)
		if i >= len(d) || d[i] != ':' {
			return 0, errAt(d, i, "':' after an object key")
		}
		if i, err = member(string(key), skipWS(d, i+1)); err != nil {
			return 0, err
		}
		i = skipWS(d, i)
		if i < len(d) && d[i] == ',' {
			i = skipWS(d, i+1)
			continue
		}
		if i < len(d) && d[i] == '}' {
			return i + 1, nil
		}
		return 0, errAt(d, i, "',' or '}' after an object value")
	}
}

// decode decodes the model.vocab value at d[i]: an object of integer ids, or
// null. Like encoding/json decoding into map[string]int, a null id reads as 0.
func (v *vocabList) decode(d []byte, i int) (int, error) {
	if hasLiteral(d, i, "null") {
		return i + 4, nil
	}
	if i >= len(d) || d[i] != '{' {
		return 0, errAt(d, i, "an object for model.vocab")
	}
	// Entries take about 20 bytes of JSON; keys about a third of that.
	arena := make([]byte, 0, (len(d)-i)/4)
	v.ends = make([]uint32, 0, (len(d)-i)/24)
	v.ids = make([]int, 0, (len(d)-i)/24)
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return 0, errAt(d, i, "a string key in model.vocab")
		}
		start := len(arena)
		var err error
		arena, i, err = appendString(arena, d, i)
		if err != nil {
			return 0, err
		}
		i = skipWS(d, i)
		if i >= len(d) || d[i] != ':' {
			return 0, errAt(d, i, "':' after a model.vocab key")
		}
		i = skipWS(d, i+1)
		id := 0
		if n, end, ok := smallInt(d, i); ok {
			id, i = n, end
		} else if hasLiteral(d, i, "null") {
			i += 4
		} else if id, i, err = readInt(d, i); err != nil {
			return 0, fmt.Errorf("model.vocab[%q]: %w", arena[start:], err)
		}
		v.ends = append(v.ends, uint32(len(arena)))
		v.ids = append(v.ids, id)
		i = skipWS(d, i)
		if i < len(d) && d[i] == ',' {
			i = skipWS(d, i+1)
			continue
		}
		if i < len(d) && d[i] == '}' {
			v.arena = string(arena)
			return i + 1, nil
		}
		return 0, errAt(d, i, "',' or '}' in model.vocab")
	}
}

// decode decodes the model.merges value at d[i]: null, an array of "a b"
// strings, or an array of ["a", "b"] pairs (the form of the first element
// decides). Nulls read as empty strings and empty pairs, as in encoding/json.
func (m *mergeList) decode(d []byte, i int) (int, error) {
	if hasLiteral(d, i, "null") {
		return i + 4, nil
	}
	if i >= len(d) || d[i] != '[' {
		return 0, errAt(d, i, "an array for model.merges")
	}
	// Pairs take about 16 bytes of JSON, their tokens about 6.
	m.toks = make([]byte, 0, (len(d)-i)/3)
	m.ends = make([]uint32, 0, (len(d)-i)/8)
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1, nil
	}
	stringForm := i < len(d) && d[i] == '"'
	for k := 0; ; k++ {
		var err error
		if stringForm {
			i, err = m.decodeString(d, i, k)
		} else {
			i, err = m.decodePair(d, i, k)
		}
		if err != nil {
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
		return 0, errAt(d, i, "',' or ']' in model.merges")
	}
}

func (m *mergeList) typeError(d []byte, i, k int, want string) {
	if m.typeErr == nil {
		m.typeErr = fmt.Errorf(`tokenizer: parse model.merges: want a list of strings "a b" or of pairs ["a", "b"]: model.merges[%d] is %s, not %s`, k, describe(d, i), want)
	}
}

// decodeString decodes merge k in the "a b" form.
func (m *mergeList) decodeString(d []byte, i, k int) (int, error) {
	start := len(m.toks)
	switch {
	case i < len(d) && d[i] == '"':
		var err error
		if m.toks, i, err = appendString(m.toks, d, i); err != nil {
			return 0, err
		}
	case hasLiteral(d, i, "null"):
		i += 4
	default:
		m.typeError(d, i, k, "a string")
		return skipValue(d, i, 4)
	}
	s := m.toks[start:]
	sp := bytes.IndexByte(s, ' ')
	if sp < 0 || bytes.IndexByte(s[sp+1:], ' ') >= 0 {
		if m.shapeErr == nil {
			m.shapeErr = fmt.Errorf("tokenizer: model.merges[%d] = %q: want two tokens separated by one space", k, s)
		}
		m.toks = m.toks[:start]
		m.ends = append(m.ends, uint32(start), uint32(start))
		return i, nil
	}
	copy(s[sp:], s[sp+1:])
	m.toks = m.toks[:len(m.toks)-1]
	m.ends = append(m.ends, uint32(start+sp), uint32(len(m.toks)))
	return i, nil
}

// decodePair decodes merge k in the ["a", "b"] form.
func (m *mergeList) decodePair(d []byte, i, k int) (int, error) {
	start := len(m.toks)
	mid := start
	n := 0
	switch {
	case hasLiteral(d, i, "null"):
		i += 4
	case i < len(d) && d[i] == '[':
		i = skipWS(d, i+1)
		if i < len(d) && d[i] == ']' {
			i++
			break
		}
		for {
			switch {
			case i < len(d) && d[i] == '"':
				var err error
				if n < 2 {
					m.toks, i, err = appendString(m.toks, d, i)
				} else {
					i, err = skipString(d, i)
				}
				if err != nil {
					return 0, err
				}
			case hasLiteral(d, i, "null"):
				i += 4
			default:
				m.typeError(d, i, k, "a list of strings")
				var err error
				if i, err = skipValue(d, i, 5); err != nil {
					return 0, err
				}
			}
			if n++; n == 1 {
				mid = len(m.toks)
			}
			i = skipWS(d, i)
			if i < len(d) && d[i] == ',' {
				i = skipWS(d, i+1)
				continue
			}
			if i < len(d) && d[i] == ']' {
				i++
				break
			}
			return 0, errAt(d, i, "',' or ']' in a model.merges pair")
		}
	default:
		m.typeError(d, i, k, "a pair")
		return skipValue(d, i, 4)
	}
	if n != 2 {
		if m.shapeErr == nil {
			m.shapeErr = fmt.Errorf("tokenizer: model.merges[%d] has %d tokens, want a pair", k, n)
		}
		m.toks = m.toks[:start]
		mid = start
	}
	m.ends = append(m.ends, uint32(mid), uint32(len(m.toks)))
	return i, nil
}
