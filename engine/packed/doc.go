// Package packed owns a model directory whose routed experts are stored
// packed: engine/expertpack's pack files stand in for the experts' raw
// bytes, which are released from the shards (hole punching, native/diskio)
// once every record is written and verified, so that the model takes about
// three quarters of its size on disk.
//
// A directory's state is its record, spool-model.json (Record): where the
// files came from (a hub repository at a commit, when known), each file's
// size and original SHA-256, and each shard's stage: absent (still being
// downloaded), present (its raw bytes verified), packed (its pack written
// and every record decoded back from the disk), releasing, released (the
// raw bytes of its pack's experts given back to the file system). The
// record is written atomically after every stage, before the next one
// starts, so that a kill at any moment resumes where it stopped and never
// loses a byte: raw bytes are released only once the pack that replaces
// them is durable and verified, and a shard whose release was interrupted
// is released again (punching a hole twice is harmless).
//
// Convert takes a directory there in place, shard by shard (Converter, one
// shard at a time, is what engine/pull runs as shards arrive); Unpack
// writes the raw bytes back from the packs, checks every shard's SHA-256
// against the record and removes the packs; Verify checks every record
// from the disk. Record.Released reports which packs stand alone, so that
// readers never take a released range for weights: Reader decodes them for
// experts kept in memory (engine/loader), engine/experts reads them from
// the packs whatever its policy. Lock and Use keep a conversion and a
// running engine apart (a directory's lock file).
//
// A released shard keeps its name, size, header and dense tensors where
// the header says, and its modification time (restored after each
// release, so that the packs' source checks hold); its SHA-256 is no
// longer the hub's. It lives in Spool's own store or a directory the user
// converted: a Hugging Face cache's content-addressed blobs are never
// modified (engine/pull keeps those apart).
package packed
