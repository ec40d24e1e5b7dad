// Package promptcache owns the prompt cache: a prefix cache of sequence
// state that survives requests, eviction and restarts. Its unit is a block
// of BlockTokens (16) consecutive tokens, keyed by a chain hash (SHA-256 of
// the previous block's hash and the block's token ids, the first rooted in
// the cache identity), as vLLM's automatic prefix caching keys its KV
// blocks; equal hashes mean equal prefixes, so a block is reused by any
// prompt that begins with the same tokens.
//
// A block holds exactly the compressed state Spool keeps per token,
// nothing expanded (engine/kvcache's block layout): per decoder layer the
// [latent | rope] KV row of each token and, on full DSA layers, its indexer
// key; and, when it has them, the MTP layer's rows of positions
// [start-1, end-1) (the MTP cache lags the main one by a position: MTP row
// p consumes token p+1) with the final-normed hidden state of its last
// position, which the MTP layer consumes next. Nothing else carries from a
// prefix to the next token. For GLM-5.2 a block is 3 MiB.
//
// Blocks live in two tiers. The memory tier is byte-capped (a line of the
// memory plan: plan.PromptCacheItems(Footprint(opts))) and evicts least
// recently used blocks, the deepest of a prefix first. Evicted blocks, and
// after SpillIdle of inactivity every block only in memory, are written to
// the disk tier: a directory (DefaultDir, under the user's cache directory)
// capped in bytes over every block file in it (DefaultDiskBytes), least
// recently used out first, recency kept in file modification times so a
// restart finds both the blocks and their order. Files are written
// atomically (temporary file, fsync, rename), carry the cache identity
// (Identity: container header digest, config, tokenizer, engine build,
// geometry; with block size and FormatVersion) and a CRC-32C; one that
// does not verify is logged, deleted and never loaded. Reads of restored
// blocks go through native's direct-read pool (O_DIRECT / F_NOCACHE), the
// experts' path, and are counted in Stats. A full or failing disk costs
// only cache: writes pause, blocks are dropped, callers never fail.
//
// # How the decode core calls it
//
// Setup, once per loaded model (host, spool run, server):
//
//	id, _ := promptcache.IdentityOf(dir, version)
//	opts := promptcache.Options{Identity: id, MemoryBytes: ..., Dir: ..., DiskBytes: ..., Pool: <the expert tier's read pool>}
//	items := plan.PromptCacheItems(promptcache.Footprint(opts)) // lines of the memory plan
//	cache, _ := promptcache.New(opts) // cache.Close() after the scheduler stops
//
// Per request, on the decode goroutine:
//
//  1. Before prefill, after picking the sequence (a fresh one, or the idle
//     sequence with the longest common prefix trimmed to it): when
//     m := cache.Lookup(prompt) covers more than the sequence holds,
//     r, err := cache.Restore(ctx, seq, m). The error means ctx ended
//     (cancel the request); nothing else fails: a block gone or damaged
//     just ends the restore early. Restore leaves at least one prompt token
//     to forward. CachedTokens = seq.Len() from here on (idle reuse and
//     restored blocks alike); report it as Progress.CachedTokens.
//  2. MTP: when r.MTP, the MTP cache holds rows 0..r.Tokens-2 and the
//     layer continues from position r.Tokens-1 with pending hidden state
//     r.Hidden (mtpFrom = r.Tokens-1, pending = [r.Hidden]); do not
//     TrimMTP. Otherwise the MTP state starts over where it does today
//     (TrimMTP(0), mtpFrom = seq.Len()), which changes drafts, never tokens.
//  3. After each prefill chunk [a, b) and the MTP layer's absorption of its
//     rows (b-2 and before), call
//     st := cache.Store(ctx, seq, promptcache.Hidden{From: a, Rows: out.Hidden})
//     and add st.Tokens to the request's CacheCreationTokens. Blocks that
//     end in the chunk then carry MTP state; pass Hidden{} when the
//     sequence's MTP cache is not position-aligned (MTP off, or rows
//     dropped), and blocks are stored without it.
//  4. When the request ends (stop, length, cancel, error), after the
//     sequence is trimmed to the tokens whose state is valid, call
//     cache.Store(ctx, seq, promptcache.Hidden{}) (or with the hidden
//     states of the last step): the reply's blocks join the cache, so the
//     next turn, which resends prompt and reply, restores both.
//
// Store copies state out of the sequence (a memcpy per new block) and
// never touches disk on the caller's goroutine; it waits only when blocks
// evicted from memory outrun the disk (bounded by ctx). Restore reads on
// the caller's goroutine; it is the prefill it replaces.
//
// Usage fields, from the request's CachedTokens (step 1) and
// CacheCreationTokens (sum of step 3):
//
//   - OpenAI usage.prompt_tokens_details.cached_tokens = CachedTokens.
//   - Anthropic usage.cache_read_input_tokens = CachedTokens,
//     cache_creation_input_tokens = CacheCreationTokens, input_tokens =
//     PromptTokens - CachedTokens - CacheCreationTokens (Anthropic counts
//     the three apart; their sum is the prompt).
//   - Responses usage.input_tokens_details.cached_tokens = CachedTokens.
//
// /stats shows Stats (hits, hit tokens, bytes read and written and size of
// each tier, evictions, invalid files, write errors).
//
// The package does not run the model, pick sequences or schedule requests;
// it keeps and returns state. Its methods are safe for concurrent use.
package promptcache
