package httpguard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// The prescan must see the conversation encoding/json will decode: keys
// are compared decoded (escapes such as "m\u0065ssages") and folded as
// encoding/json folds them ("Messages", "meſſages"), and a body whose top
// level names one field twice is refused, since readers disagree on which
// one counts (encoding/json takes the last, the prescan saw the first).

// conversationLength counts the elements of the array the top-level field
// key holds in body, counting no further than stop. ok is false when body
// is not an object or the field is not an array (the decoder then says
// what is wrong); err is a top-level field named twice.
func conversationLength(body []byte, key string, stop int) (n int, ok bool, err error) {
	sc := jsonScan{b: body}
	if !sc.consume('{') {
		return 0, false, nil
	}
	want := foldKey(key)
	seen := map[string]string{}
	found := false
	for {
		if sc.consume('}') {
			return n, found && ok, nil
		}
		k, kok := sc.key()
		if !kok || !sc.consume(':') {
			return n, found && ok, nil
		}
		folded := foldKey(k)
		if first, dup := seen[folded]; dup {
			return n, false, fmt.Errorf("the request has the field %q twice (the second time as %q); send each field once", first, k)
		}
		seen[folded] = k
		if folded == want {
			found = true
			n, ok = sc.countArray(stop)
			if !ok || n >= stop {
				// Malformed (the decoder reports it) or already too long.
				return n, ok, nil
			}
		} else if !sc.skipValue(0) {
			return n, found && ok, nil
		}
		if !sc.consume(',') {
			sc.consume('}')
			return n, found && ok, nil
		}
	}
}

// key reads an object key decoded as encoding/json decodes it (escapes
// resolved, invalid UTF-8 replaced).
func (s *jsonScan) key() (string, bool) {
	start := s.pos
	raw, ok := s.str()
	if !ok {
		return "", false
	}
	if !bytes.ContainsRune([]byte(raw), '\\') && utf8.ValidString(raw) {
		return raw, true
	}
	s.ws()
	var k string
	if err := json.Unmarshal(bytes.TrimSpace(s.b[start:s.pos]), &k); err != nil {
		return "", false
	}
	return k, true
}

// foldKey folds a key so that foldKey(a) == foldKey(b) exactly when
// encoding/json matches a and b (bytes.EqualFold: simple Unicode folding,
// under which "ſ" is "s" and the Kelvin sign "k").
func foldKey(k string) string {
	var out []byte
	for _, r := range k {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
	}
	return string(out)
}
