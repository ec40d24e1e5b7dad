// Package grammar owns constrained decoding for structured output: it
// compiles OpenAI response_format modes (json_object, and json_schema for a
// documented subset of JSON Schema) into a grammar, and tool parameters
// schemas into one grammar per argument (CompileArguments: string
// arguments as the raw text of call markup), and for each request a
// Matcher tells which token ids may come next so that the model's output is
// always a prefix of a valid value, and whether the output is complete (the
// only point where an end-of-sequence token is allowed).
//
// The grammar is a byte-level pushdown automaton. A Vocab is built once per
// tokenizer: a byte trie over every token's decoded bytes, plus the tokens
// that are plain string content grouped by length. A mask is computed by
// walking the trie against the automaton's state, pruning a whole subtree as
// soon as its prefix is rejected; inside a string the plain-content tokens are
// taken from a precomputed bitset and only the others are walked.
//
// Output rules: objects keep the schema's "properties" order (as OpenAI's
// strict mode does); where whitespace may go, it is a single space or a
// newline and at most maxIndent spaces or tabs; numbers have bounded digit
// counts, and integers stay within +-(2^53-1), the range a double holds
// exactly (I-JSON); \u escapes of surrogates are refused (write the
// character itself). These only narrow the set of valid outputs, never
// widen it.
//
// Special tokens never appear in the output (TokenizerVocab excludes them;
// NewVocab takes the exclusions); non-special added tokens such as "<think>"
// are ordinary text inside strings. With a byte-level vocabulary every state
// allows at least one token, since every state can be completed.
//
// The package does not sample, does not touch logits and does not know
// about requests or chat templates; the caller applies the mask (ids at or
// beyond Vocab.Size are never allowed).
package grammar
