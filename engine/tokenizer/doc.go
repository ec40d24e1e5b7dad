// Package tokenizer owns text <-> token id conversion for GLM models: it reads a
// Hugging Face tokenizer.json describing a byte-level BPE tokenizer and encodes
// and decodes exactly as HF tokenizers 0.23.2 does (encode with
// add_special_tokens=False; decode with or without special tokens).
//
// Supported tokenizer.json features: added tokens with all their flags
// (special, single_word, lstrip, rstrip, normalized); a null normalizer; a
// pre-tokenizer that is a Split with the GLM (GPT-4 style) regex followed by
// ByteLevel (in a Sequence; ByteLevel may also stand alone; use_regex must be
// false); a BPE model (merges as "a b" strings or [a, b] pairs, ignore_merges,
// unk_token, fuse_unk); a ByteLevel decoder; any post_processor (none adds ids
// when special tokens are not requested). Load and Parse reject anything else
// with an error that names it.
//
// The GLM split regex needs lookahead, which Go's regexp lacks, so it is
// implemented by hand; its \p{L} and \p{N} follow Unicode 16.0 like the
// Oniguruma inside tokenizers 0.23.2 (Go's tables are 15.0; unicode16.go
// supplies the difference).
//
// Loading is fast (a few ms for an 8k vocabulary, about 0.1 s for GLM-5.2's
// 155k): model.vocab and model.merges, nearly all of the file, are decoded by
// a scanner of its own (scan.go) that matches encoding/json exactly, and the
// rest by encoding/json. Unlike encoding/json it rejects a second "model",
// "vocab" or "merges" key and case variants of them, which encoding/json would
// merge.
//
// The package does not render chat templates and does not know which ids end a
// generation; callers decide that from the model's configuration.
package tokenizer
