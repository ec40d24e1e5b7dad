// Package plan owns the process memory equation: given what a model's
// weights occupy (from a container's headers or, for a bare config, from an
// assumed artifact format) and the run's shape (memory, context length,
// sequences, threads), it lays out every line item the process holds —
// resident weights, expert slabs (working bank, MTP bank, LRU and pinned
// cache), compressed KV cache, one line per buffer that grows with the rows
// of a forward, the context, the vocabulary, the experts or the threads,
// the prompt cache's memory tier and I/O buffers, and reserves — chooses
// the prefill segment from the prefill budget (a prompt goes through the
// model layer by layer over a whole segment, which costs its per-token
// state and a bounded scratch), sizes the prompt cache's memory tier
// (PromptCacheShare) and the expert cache from what remains and the Go
// memory limit from the heap lines. It refuses, with the table and a
// suggestion, a run in which not even one cache slot per expert layer
// fits.
//
// It reads no weights and makes no OS calls: the machine's memory and
// thread count come in through Options.
package plan
