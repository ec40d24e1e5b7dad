// Package pull brings a model from the hub into Spool's own store, packed
// as it downloads: each shard is downloaded (engine/download), its SHA-256
// verified, its routed experts packed and every record decoded back from
// the disk, its raw expert bytes released (engine/packed), then the next —
// so the model takes about three quarters of its size on disk, and never
// more than that plus the few shards in flight (Options.Window, two by
// default: one packed while the next downloads). Every stage resumes after
// a kill: the download keeps its checkpointed ranges, and the model's
// record (spool-model.json) says how far each shard got.
//
// Before any payload byte it fetches every shard's safetensors header
// (small ranged requests) into a placeholder, so that the experts of a
// shard can be located — and the disk the model will take estimated —
// before the shard arrives.
//
// A model is stored in <store>/models--<owner>--<name>/<commit>, a plain
// model directory Spool opens like any other. With KeepOriginal, the files
// go to the Hugging Face cache as usual (other tools read them there) and
// the store's directory holds links to them plus the packs: the disk holds
// both.
//
// Repairer fetches one expert's raw bytes again with Range requests, to
// rebuild a damaged pack record (or a damaged raw expert) in place: the
// streamed tier's experts.Repairer, and spool pull --repair (RepairModel).
// Adopt brings a Hugging Face cache snapshot into the store, to be packed
// there (spool pack of a snapshot).
package pull
