// Package generate owns the decode core: one sequence's generation as a
// state machine (Decoder) that prefills the prompt in chunks, processes
// logits (logit bias, presence and frequency penalties, logprobs, the
// constraint's mask), samples, stops (stop tokens, a completed constraint,
// the token limit, the context limit) and speculates with the model's MTP
// layer, which also absorbs the prompt chunk by chunk: in the decode steps
// the sequence is forwarded alone, those its gate (engine/draftgate) finds
// drafting cheaper in, timing them on the gate's clock and counting the
// expert bytes the runner records for their forwards. While the gate
// chooses plain steps the MTP layer is left behind, and a drafting step
// that follows catches it up on a few of the latest states (MaxCatchUp),
// apart from the step's own cost. It restores the
// prompt's cached prefix from the prompt cache (engine/promptcache) before
// the prefill and stores the sequence's blocks into it, MTP state included
// (the MTP cache continues the main one a position behind). Generate
// drives one Decoder alone (spool run); engine/scheduler drives many and
// forwards their rows together. Either way, restored or computed, a
// sequence's tokens are the same. With Params.Embed the Decoder is an
// embedding instead: it prefills the whole prompt and pools the final
// hidden states into a unit vector (Result.Embedding), sampling nothing.
//
// It does not render prompts, detokenize or queue requests.
package generate
