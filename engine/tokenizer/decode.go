package tokenizer

// Decode converts token ids to text like HF tokenizers' decode(ids,
// skip_special_tokens). Ids that are not in the vocabulary (negative, too
// large, or unused) are skipped, as HF does. With skipSpecial, special added
// tokens are dropped; content markers such as "<think>" are kept. Byte
// sequences that are not valid UTF-8 become U+FFFD, one per maximal invalid
// subsequence (Rust's String::from_utf8_lossy).
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	var raw []byte
	for _, id := range ids {
		raw = t.appendToken(raw, id, skipSpecial)
	}
	out, _ := appendLossy(make([]byte, 0, len(raw)), raw, true)
	return string(out)
}

// appendToken appends the bytes id decodes to, or nothing when Decode skips
// it. Decoding a token on each use is cheaper than keeping a table of them.
func (t *Tokenizer) appendToken(dst []byte, id int, skipSpecial bool) []byte {
	if id < 0 || id >= len(t.hasToken) || !t.hasToken[id] {
		return dst
	}
	if skipSpecial && t.skipOnSpecial[id] {
		return dst
	}
	return appendByteLevelDecode(dst, t.tokenStrings[id])
}

// StreamDecoder turns a stream of token ids into text deltas that are always
// valid UTF-8. The concatenation of everything Add and Flush return equals
// Decode of all the ids. A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte // start of a multi-byte character not yet complete
	out         []byte
}

// NewStreamDecoder returns a StreamDecoder that decodes like
// Decode(ids, skipSpecial).
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, skipSpecial: skipSpecial}
}

// Add consumes one token id and returns the text it completes, which may be
// empty when the token ends inside a multi-byte character (those bytes are
// held back) or when Decode would skip the id.
func (d *StreamDecoder) Add(id int) string {
	n := len(d.pending)
	if d.pending = d.t.appendToken(d.pending, id, d.skipSpecial); len(d.pending) == n {
		return ""
	}
	var held int
	d.out, held = appendLossy(d.out[:0], d.pending, false)
	d.pending = append(d.pending[:0], d.pending[len(d.pending)-held:]...)
	return string(d.out)
}

// Flush returns whatever is held back (an incomplete character, as U+FFFD the
// way Decode renders it) and resets the decoder for a new stream.
func (d *StreamDecoder) Flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	d.out, _ = appendLossy(d.out[:0], d.pending, true)
	d.pending = d.pending[:0]
	return string(d.out)
}
