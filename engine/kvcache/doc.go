// Package kvcache owns the compressed attention state of one sequence: per
// decoder layer the normalized KV latent and the shared roped key of every
// token (MLA's compressed cache — nothing per head is stored), the DSA
// indexer keys of full indexer layers, and the MTP layer's own cache.
//
// It does no arithmetic beyond copying; the model decides what is stored.
// A Sequence is used by one forward at a time.
package kvcache
