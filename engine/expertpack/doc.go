// Package expertpack owns packed experts: a lossless re-encoding of a
// model's routed experts that the streamed tier reads instead of the raw
// shard bytes, fewer bytes per expert for the same weights.
//
// Each shard gets a pack file beside it (<shard>.spoolpack, see
// index.go) holding a record per expert (see record.go): the expert's
// weight bytes coded with engine/rans, one table per matrix, in blocks,
// and its scales raw. PackShard writes a shard's pack, verifying every
// record by decoding it back (or leaving that to VerifyPack, which decodes
// every record as the disk holds it); ReadIndex and ParseRecord check what
// they read and refuse, with an error wrapping ErrCorrupt, anything else;
// an Unpacker rebuilds an expert in place in the slab it was read into,
// block by block as its bytes land, so decoding overlaps the read, and on
// several goroutines at once (a block waits only for the blocks whose
// input its output overwrites). Packing is deterministic: RebuildRecord
// codes an expert's raw bytes again into the record a damaged one was.
// engine/packed releases the raw bytes a pack stands in for.
//
// Output bytes are always the original payload: a record only ever
// changes how many bytes are read, never what the model computes.
package expertpack
