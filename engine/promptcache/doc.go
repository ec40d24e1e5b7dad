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
// memory plan, which sizes it: plan.Options.PromptCache) and evicts least
// recently used blocks, the deepest of a prefix first. Evicted blocks, and
// after SpillIdle of inactivity every block only in memory, are written to
// the disk tier: a directory (DefaultDir, under the user's cache directory)
// capped in bytes over every block file in it (DefaultDiskBytes), least
// recently used out first, recency kept in file modification times so a
// restart finds both the blocks and their order. Files are written
// atomically (temporary file, fsync, rename), carry the cache identity
// (Identity: container header digest, weights digest, config, tokenizer,
// engine build, geometry; with block size and FormatVersion) and a CRC-32C; one that
// does not verify is logged, deleted and never loaded. Reads of restored
// blocks go through diskio's direct-read pool (O_DIRECT / F_NOCACHE), the
// experts' path, and are counted in Stats. A full or failing disk costs
// only cache: writes pause, blocks are dropped, callers never fail.
//
// # How the decode core calls it
//
// Setup, once per loaded model (the app's openEngine for serve and the
// app, spool run):
//
//	id, _ := promptcache.IdentityOf(ctx, dir, version, fingerprint.Options{Store: ...})
//	opts := promptcache.Options{Identity: id, Dir: ..., DiskBytes: ..., Pool: <the expert tier's read pool>}
//	fp, _ := promptcache.Footprint(opts) // planOpts.PromptCache = &fp; p, _ := plan.New(...)
//	opts.MemoryBytes = p.PromptCacheBytes // the plan sizes the memory tier
//	cache, _ := promptcache.New(opts)     // cache.Close() after the scheduler stops
//
// Per request, engine/generate's Decoder (used alone by spool run and by
// the scheduler for every request, batched or not):
//
//  1. Before prefill (Decoder.Restore), after keeping the prefix the
//     sequence already holds: when m := cache.Lookup(prompt) covers more,
//     r, err := cache.Restore(ctx, seq, m). The error means ctx ended
//     (cancel the request); nothing else fails: a block gone or damaged
//     just ends the restore early. Restore leaves at least one prompt token
//     to forward. CachedTokens = seq.Len() from here on (held and restored
//     tokens alike).
//  2. MTP: the MTP cache's rows are found by position (kvcache's MTPEnd;
//     mtp.go there explains the lag). When r.MTP, its last row is position r.Tokens-2 and the
//     MTP layer absorbs r.Hidden with the prompt's next token; otherwise an
//     MTP cache ending one short of the sequence has its last token
//     forwarded again, and any other starts over at the sequence's end
//     (ResetMTP), which changes drafts, never tokens.
//  3. After each prefill chunk [a, b) and the MTP layer's absorption of its
//     rows (the hidden states of a Forward survive the MTPForward calls
//     after it), cache.Store(ctx, seq, promptcache.Hidden{From: a, Rows:
//     out.Hidden}) adds the chunk's blocks; st.Tokens counts toward the
//     request's CacheCreationTokens. A block carries MTP state when its MTP
//     rows are in the sequence (Sequence.HasMTPRows) and its last hidden
//     state is given.
//  4. While decoding, when the MTP layer absorbs pending hidden states
//     (drafting, or before MaxPendingMTP when batched), the blocks ending
//     among them are stored with their MTP state; when the request ends
//     (stop, length, cancel, error) the sequence is trimmed to the tokens
//     whose state is valid, the MTP layer absorbs what is still pending,
//     and cache.Store adds the reply's blocks: the next turn, which resends
//     prompt and reply, restores both.
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
