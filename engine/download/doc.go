// Package download fetches a Hugging Face model repository at a revision into
// the standard Hugging Face cache (or another Layout: engine/pull's model
// directories in Spool's store), in a way that survives crashes, sleeps,
// network drops and full disks: it plans the download and checks free space
// before the first payload byte, fetches several files and byte ranges in
// parallel with stall detection and retries, keeps partial blobs and a resume
// record of what reached the disk, verifies every blob (LFS sha256 or git
// blob sha1) before it is renamed into place, and reports progress as events.
//
// Resume guarantee: a byte range is checkpointed once its bytes were written
// to blobs/<etag>.incomplete, the file was synced, and the range was recorded
// in blobs/<etag>.incomplete.spool.json (written atomically). Checkpointed
// bytes are never fetched again, across pauses, crashes and restarts, unless
// the finished blob fails verification, in which case the whole partial is
// deleted and fetched again. A finished blob is never fetched again.
//
// Admit lets a caller hold a blob back until it has room for it (engine/pull
// packs shards as they arrive and keeps few raw at a time); Need lets it say
// what the files will take on the volume, which the preflight checks.
//
// This package must not parse model files, know about Spool's UI or CLI, or
// make system calls itself: free space, sleep assertions, file locks and
// cache hints come from native/sysinfo, native/power and native/diskio.
package download
