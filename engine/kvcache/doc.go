// Package kvcache owns the compressed attention state of one sequence: per
// decoder layer the normalized KV latent and the shared roped key of every
// token (MLA's compressed cache — nothing per head is stored), the DSA
// indexer keys of full indexer layers, and the MTP layer's own cache, which
// lags the main one by a position. The lag is this package's invariant:
// mtp.go explains it, and every operation that moves a sequence back
// (Trim, Rewind, Clear, Rollback) keeps it, so that callers never do the
// MTP cache's arithmetic.
//
// It does no arithmetic beyond copying; the model decides what is stored.
// A Sequence is used by one forward at a time.
package kvcache
