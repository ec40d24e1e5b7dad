// Package hfcache owns the Hugging Face cache layout on disk, as
// huggingface_hub and other tools (transformers, MLX, llama.cpp) read and
// write it:
//
//	<cache>/models--<owner>--<name>/
//	    blobs/<etag>                 content, named by sha256 (LFS) or git sha1
//	    blobs/<etag>.incomplete      a download in progress
//	    refs/<revision>              the commit a branch or tag points to
//	    snapshots/<commit>/<path>    relative symlinks to ../../blobs/<etag>
//	<cache>/.locks/models--<owner>--<name>/<etag>.lock
//
// It must not talk to the network or decide what to download; it names
// paths, reads and writes refs and snapshot links atomically, and finds a
// finished snapshot.
package hfcache
