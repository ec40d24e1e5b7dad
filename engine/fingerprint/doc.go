// Package fingerprint owns the content digest of a model's weight files:
// the SHA-256 of each shard's bytes, and a model digest over them, so
// that what depends on the weights (the prompt cache's identity, the
// experts' usage history) tells one checkpoint from another with the same
// layout: a fine-tune, a re-published or a damaged copy.
//
// Hashing hundreds of GiB on every start would cost minutes, so a shard's
// digest is taken, in this order, from:
//
//   - the Hugging Face cache: a shard that is a link to
//     blobs/<sha256> is named by the SHA-256 the download verified
//     (engine/download checks every blob before it is renamed into place);
//   - the store: a small JSON file of digests computed before, each keyed
//     by the file's absolute path and stamp (device, inode, size,
//     modification time; native/diskio.Stamp), so that a file rewritten,
//     replaced or resized is hashed again;
//   - reading the file once (direct reads that leave the page cache alone)
//     and remembering the digest in the store.
//
// The same read takes, for the byte ranges a caller names
// (Options.Regions: the routed experts' extents, named by the loader),
// their CRC-32C (internal/crc32c), remembered with the digest; a file of
// the Hugging Face cache is read once for them. The streamed tier checks
// every expert read against them (engine/experts), and the packs' record
// checksums are the same sums of the same bytes.
//
// The store is a cache: one that cannot be read is logged and rebuilt,
// one of an older format is read again (it holds no checksums), and it is
// written atomically (internal/atomicfile). Entries of files gone or
// changed are dropped when it is written.
//
// It does not parse model files: callers name the shards and the ranges.
package fingerprint
