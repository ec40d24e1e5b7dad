package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

func TestEncodeLimitStopsEarly(t *testing.T) {
	tok := loadFixture(t)
	text := strings.Repeat("<|user|>\nHello there, how are you today? ", 2000)
	all := tok.Encode(text)
	for _, limit := range []int{0, 1, 7, 100, len(all) - 1, len(all), len(all) + 5} {
		ids, ok := tok.EncodeLimit(text, limit)
		if ok != (len(all) <= limit) {
			t.Errorf("limit %d of %d tokens: ok = %v", limit, len(all), ok)
		}
		if ok && !slices.Equal(ids, all) {
			t.Errorf("limit %d: a text that fits encodes differently", limit)
		}
		if !ok && (len(ids) <= limit || !slices.Equal(ids[:limit+1], all[:limit+1])) {
			t.Errorf("limit %d: got %d tokens, want a prefix of more than the limit", limit, len(ids))
		}
		// It stops soon after the limit, not at the end of the text.
		if !ok && len(ids) > limit+64 {
			t.Errorf("limit %d: went on to %d tokens", limit, len(ids))
		}
	}
}
