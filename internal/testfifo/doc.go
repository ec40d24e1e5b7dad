// Package testfifo is test support for code that reads files a user hands
// it: Refused checks that a FIFO where a regular file belongs is refused
// with a clear error instead of blocking the reader forever.
//
// The refusal itself is implemented where files are opened
// (internal/regularfile for small files, engine/container for shards);
// this package only checks it. It exists on Unix systems, where FIFOs do.
package testfifo
