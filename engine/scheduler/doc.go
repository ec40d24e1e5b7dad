// Package scheduler owns admission and continuous batching for one loaded
// model: a bounded FIFO queue of generation requests, a fixed number of
// sequences, and one loop that forwards the rows of every active request
// together (one decode row per request plus at most one prefill chunk per
// step, so the model takes one expert union across rows) and streams the
// tokens. Each request is driven by a generate.Decoder — the decode core
// that samples, processes logits, stops and speculates — so its tokens are
// exactly those generate.Generate gives, whatever it is batched with; a
// request alone in the batch speculates with the MTP layer when allowed,
// in the steps its sequence's gate (engine/draftgate, one per sequence,
// kept across a conversation's turns) finds drafting cheaper.
// A request reuses the longest prefix an idle sequence holds, then
// restores what the prompt cache (Config.PromptCache) holds beyond it, at
// admission; its blocks go into the cache as it runs. An embedding
// (generate.Params.Embed) queues and prefills like any prompt but reuses
// no prefix and keeps no sequence; on an accelerated model its chunks are
// forwarded alone, in steps that alternate with the decoders'.
//
// It does not tokenize, detokenize, match stop strings or speak HTTP: the
// caller reads tokens from a Stream and cancels it when its text says stop.
package scheduler
