// Package model owns the GLM-5.2 graph (glm_moe_dsa): int8 embedding, MLA
// attention over a compressed KV cache, the DSA lightning indexer, the
// sigmoid router with shared and routed experts, the final norm and lm_head,
// and the MTP draft layer. A decoder layer has one forward, which the main
// stack and the MTP layer both run. It is pure computation: weights come
// from a Weights reader at load time, routed experts from an experts.Source
// at run time, per-sequence state lives in a kvcache.Sequence, and a
// forward's buffers belong to a Runner, sized once by the memory plan's
// Limits.
//
// The math follows Hugging Face transformers' glm_moe_dsa (5.17), equation
// by equation; the parity tests check it against that implementation's
// float64 references (internal/fixtures).
package model
