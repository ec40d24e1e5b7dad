package tokenizer

import (
	"encoding/json"
	"fmt"
)

// SyntheticJSON returns a valid byte-level BPE tokenizer.json with exactly
// normal + len(specials) ids, for models that have no trained tokenizer
// (spool gen-bench writes one beside its synthetic weights, so that every
// command that takes a model directory runs on them). Ids 0-255 are the
// byte tokens, so any text encodes; ids 256..normal-1 are merges built
// breadth first from the space marker and the lowercase letters (every
// two-symbol token, then every three-symbol one, and so on), so English
// text encodes to fewer ids than bytes; ids normal.. are the specials, in
// order, as special added tokens. The result depends on its arguments
// only. The pre-tokenizer and decoder are GLM's.
func SyntheticJSON(normal int, specials []string) ([]byte, error) {
	if normal < 256 {
		return nil, fmt.Errorf("tokenizer: a synthetic tokenizer needs at least the 256 byte tokens, not %d", normal)
	}
	vocab := make(map[string]int, normal)
	tokens := make([]string, 0, normal)
	for c := range 256 {
		s := string(byteToRune[c])
		vocab[s] = len(tokens)
		tokens = append(tokens, s)
	}
	alphabet := []string{string(byteToRune[' '])}
	for c := 'a'; c <= 'z'; c++ {
		alphabet = append(alphabet, string(c))
	}
	merges := make([][2]string, 0, normal-256)
	// Breadth first: each token of the queue extended by each symbol.
	queue := append([]string(nil), alphabet...)
	for head := 0; len(tokens) < normal; head++ {
		prefix := queue[head]
		for _, sym := range alphabet {
			if len(tokens) == normal {
				break
			}
			s := prefix + sym
			if _, ok := vocab[s]; ok {
				continue
			}
			vocab[s] = len(tokens)
			tokens = append(tokens, s)
			merges = append(merges, [2]string{prefix, sym})
			queue = append(queue, s)
		}
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	seen := map[string]bool{}
	addedTokens := make([]added, len(specials))
	for i, s := range specials {
		if s == "" || seen[s] {
			return nil, fmt.Errorf("tokenizer: synthetic special token %d (%q) is empty or repeated", i, s)
		}
		if _, ok := vocab[s]; ok {
			return nil, fmt.Errorf("tokenizer: synthetic special token %q is also a vocabulary token", s)
		}
		seen[s] = true
		addedTokens[i] = added{ID: normal + i, Content: s, Special: true}
	}
	doc := map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   addedTokens,
		"normalizer":     nil,
		"post_processor": nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": glmPattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges,
		},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: synthetic tokenizer: %w", err)
	}
	return data, nil
}
