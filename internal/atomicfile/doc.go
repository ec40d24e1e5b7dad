// Package atomicfile owns the one way Spool replaces a file the user owns
// (settings, usage histories, prompt-cache blocks, packs, containers, the
// Hub cache's refs): write a temporary file beside it, fsync it, rename it
// over the old one, then fsync the directory so that the rename itself
// survives a crash. Readers see the old contents or the new, never a mix.
// A temporary file is locked while it is written; one whose process died
// is a leftover that Sweep removes (each owner sweeps its own when it
// starts, and every write sweeps the ones of its path).
package atomicfile
